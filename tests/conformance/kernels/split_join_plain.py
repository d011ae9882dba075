"""`hl.join(a, b)` stacks along a new last dim of size 2 and `hl.split` takes it apart again (the literal
lowering, when the pair is not a view of a wider dim)."""
import helion
import helion.language as hl
import torch


# helion: args(a=f32[16, 256], b=f32[16, 256])
@helion.kernel(static_shapes=True)
def join_then_split(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a)
    for tile_m, tile_n in hl.tile(a.size()):
        pair = hl.join(a[tile_m, tile_n], b[tile_m, tile_n])
        lo, hi = hl.split(pair * 2.0)
        out[tile_m, tile_n] = lo - hi
    return out


def reference(a, b):
    return (a - b) * 2.0
