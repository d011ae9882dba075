"""`hl.full` stored through a block larger than the tensor (block 4096 over 1024 elements)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[1024])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[4096]))
def full_block_over_extent(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = hl.full([t], 1.5, dtype=x.dtype)
    return out


def reference(x):
    return torch.full_like(x, 1.5)
