"""A reduction whose result does not fit where it is stored (a [128] row sum into a [2]-row block): the
kernel is wrong and must be refused."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[4, 16, 128])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[2]))
def sum_shape_mismatch(x: torch.Tensor) -> torch.Tensor:
    b = x.size(0)
    out = torch.empty([b], dtype=x.dtype, device=x.device)
    for tb in hl.tile(b):
        out[tb] = x[tb, :, :].sum([0, 1])
    return out


REJECT = r"HPL1\d\d|HPL2\d\d"
