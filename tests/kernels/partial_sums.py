"""Reductions over a middle dim, over two dims at once, and through an integer index; three outputs."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[16, 32, 256])
@helion.kernel(static_shapes=True)
def sums(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    b, n, m = x.size()
    col = torch.empty([b, m], dtype=x.dtype, device=x.device)
    tot = torch.empty([b], dtype=x.dtype, device=x.device)
    for tile_b, tile_m in hl.tile([b, m]):
        col[tile_b, tile_m] = x[tile_b, :, tile_m].sum(1)
    for tile_b in hl.tile(b):
        tot[tile_b] = x[tile_b, :, :].sum([1, 2])
    first = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        first[tile_m] = x[0, :, tile_m].sum(0)
    return col, tot, first


def reference(x):
    return x.sum(1), x.sum([1, 2]), x[0].sum(0)

SMALL = {"x": "f32[16, 32, 256]"}
