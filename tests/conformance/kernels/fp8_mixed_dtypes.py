"""An 8-bit float tensor meeting a float32 tensor in an elementwise op: torch refuses the promotion (and so does
jnp), so it is refused at compile time rather than giving a value of the wrong dtype."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(21)
    return [(torch.randn(64, 128, generator=g) * 0.5).to(torch.float8_e4m3fn), torch.randn(64, 128, generator=g)]


@helion.kernel(static_shapes=True)
def fp8_mix(a: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    out = torch.empty(c.shape, dtype=torch.float32, device=c.device)
    for tile_m, tile_n in hl.tile(c.size()):
        out[tile_m, tile_n] = a[tile_m, tile_n] * c[tile_m, tile_n]
    return out


REJECT = r"HPL105 .*8-bit float"
