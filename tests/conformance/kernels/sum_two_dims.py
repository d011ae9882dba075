"""One reduction over two dims at once (`sum([1, 2])`), which upstream's Pallas backend refuses."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[8, 16, 128])
@helion.kernel(static_shapes=True)
def sum_two_dims(x: torch.Tensor) -> torch.Tensor:
    b = x.size(0)
    out = torch.empty([b], dtype=x.dtype, device=x.device)
    for tb in hl.tile(b):
        out[tb] = x[tb, :, :].sum([1, 2])
    return out


def reference(x):
    return x.sum([1, 2])
