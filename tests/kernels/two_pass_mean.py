"""Mean then subtract in two inner loops; the accumulator starts as zeros_like of an integer-indexed load."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[128, 256])
@helion.kernel(static_shapes=True)
def two_pass_mean(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        acc = torch.zeros_like(x[tile_m, 0], dtype=torch.float32)
        for tile_n in hl.tile(n):
            acc = acc + torch.sum(x[tile_m, tile_n], dim=-1)
        mean = (acc / n)[:, None]
        for tile_n in hl.tile(n):
            out[tile_m, tile_n] = x[tile_m, tile_n] - mean.to(x.dtype)
    return out


def reference(x):
    return x - x.mean(1, keepdim=True)

SMALL = {"x": "f32[128, 256]"}
