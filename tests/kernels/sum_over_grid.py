"""An inner hl.grid loop over a leading dim (one row per iteration) carrying an accumulator."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[4, 64, 256])
@helion.kernel()
def sum_heads(x: torch.Tensor) -> torch.Tensor:
    h, m, n = x.size()
    out = torch.empty([m, n], dtype=torch.float32, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for i in hl.grid(h):
            acc = acc + x[i, tile_m, tile_n]
        out[tile_m, tile_n] = acc
    return out


def reference(x):
    return x.sum(0)

SMALL = {"x": "f32[4, 64, 256]"}
