"""`tile.begin` and `tile.end` used as values in arithmetic (the result depends on the block size, pinned)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[1024])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[256]))
def tile_begin_end_values(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t] + t.begin * 2 - t.end
    return out


def reference(x):
    begin = (torch.arange(x.numel()) // 256) * 256
    return x + (begin * 2 - (begin + 256)).to(x.dtype)
