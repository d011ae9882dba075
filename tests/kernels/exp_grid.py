"""hl.grid over the batch, hl.tile inside it: integer indices into the leading dim."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[16, 8, 256])
@helion.kernel()
def exp_grid(x: torch.Tensor) -> torch.Tensor:
    b, m, n = x.size()
    out = torch.empty_like(x)
    for i in hl.grid(b):
        for tile_m, tile_n in hl.tile([m, n]):
            out[i, tile_m, tile_n] = torch.exp(x[i, tile_m, tile_n])
    return out


def reference(x):
    return torch.exp(x)

SMALL = {"x": "f32[4, 8, 256]"}
