"""A lower-triangular mask from two `tile.index` vectors broadcast with `[:, None]` / `[None, :]`."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[16, 16])
@helion.kernel(static_shapes=True)
def tile_index_lower_mask(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in hl.tile(m):
        for tn in hl.tile(n):
            lower = tm.index[:, None] >= tn.index[None, :]
            out[tm, tn] = torch.where(lower, x[tm, tn], torch.zeros_like(x[tm, tn]))
    return out


def reference(x):
    return torch.tril(x)
