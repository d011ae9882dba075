"""`hl.split` of a last dim that is not 2 wide has no meaning: refused."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[16, 3])
@helion.kernel(static_shapes=True)
def split_three(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([16], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(16):
        a, b = hl.split(x[tile_m, :])
        out[tile_m] = a + b
    return out


REJECT = r"HPL105 .*hl.split"
