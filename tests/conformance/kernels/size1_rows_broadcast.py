"""A [1, N] input tiled by a block larger than its size-1 dim: the size-1 dim broadcasts, it is not padded
(upstream: broadcast masks on size-1 dims)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[1, 12], bias=f32[12])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16, 16]))
def size1_rows_broadcast(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0), bias.size(0)], dtype=x.dtype, device=x.device)
    for ti, tj in hl.tile(out.size()):
        out[ti, tj] = x[ti, tj] + bias[tj]
    return out


def reference(x, bias):
    return x + bias
