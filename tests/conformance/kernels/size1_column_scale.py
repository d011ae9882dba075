"""A [M, 1] column read as `m[t0, :]` scaling a 2-D tile: the size-1 dim broadcasts."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[64, 128], m=f32[64, 1])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16, 128]))
def size1_column_scale(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t0, t1 in hl.tile(x.size()):
        out[t0, t1] = x[t0, t1] * m[t0, :]
    return out


def reference(x, m):
    return x * m
