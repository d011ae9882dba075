"""A point store at `t.begin + 5` in every block (block 256, pinned): one element per block, zero
elsewhere."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[1024])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[256]))
def begin_plus_constant_point(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for t in hl.tile(x.size(0)):
        out[t.begin + 5] = x[t.begin + 5] + 1.0
    return out


def reference(x):
    out = torch.zeros_like(x)
    out[5::256] = x[5::256] + 1.0
    return out
