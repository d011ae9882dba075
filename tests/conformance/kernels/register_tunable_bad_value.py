"""A config value a registered tunable's fragment does not allow (not a power of two) is refused."""
import helion
import helion.language as hl
import torch
from helion.autotuner import PowerOfTwoFragment


# helion: args(x=f32[64, 256])
@helion.kernel(static_shapes=True, config=helion.Config(chunks=3))
def chunked_scale(x: torch.Tensor) -> torch.Tensor:
    chunks = hl.register_tunable("chunks", PowerOfTwoFragment(1, 8))
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = x[tile] * chunks
    return out


REJECT = r"HPL109 .*chunks=3.*power of two"
