"""A [N, 1] input added to a [N] bias into an [N, N] output argument: the size-1 column broadcasts against
a block wider than it; the kernel returns nothing."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[12, 1], bias=f32[12], out=f32[12, 12])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16, 16]))
def size1_cols_broadcast(x: torch.Tensor, bias: torch.Tensor, out: torch.Tensor) -> None:
    for ti, tj in hl.tile(out.size()):
        out[ti, tj] = x[ti, tj] + bias[tj]


def reference(x, bias, out):
    out.copy_(x + bias[None, :])
