"""Names a kernel file takes from upstream's `helion._testing` resolve to what they mean on a TPU:
`DEVICE` is the TPU, `HALF_DTYPE` is bfloat16 (TPUs have no float16 vector unit)."""
import helion
import helion.language as hl
import torch
from helion._testing import DEVICE, HALF_DTYPE


# helion: args(x=f32[32, 256])
@helion.kernel(static_shapes=True)
def half_copy(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape, dtype=HALF_DTYPE, device=DEVICE)
    for tile in hl.tile(x.size()):
        out[tile] = (x[tile] * 2.0).to(HALF_DTYPE)
    return out


def reference(x):
    return (x * 2.0).to(torch.bfloat16)
