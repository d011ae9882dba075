"""`hl.arange` over a whole row, broadcast and added to each row of the tile."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[16, 128])
@helion.kernel(static_shapes=True)
def arange_columns(x: torch.Tensor) -> torch.Tensor:
    n, m = x.size()
    out = torch.empty_like(x)
    for tn in hl.tile(n):
        cols = hl.arange(m)
        out[tn, :] = x[tn, :] + cols[None, :]
    return out


def reference(x):
    return x + torch.arange(x.size(1), dtype=torch.float32)[None, :]


CONFIGS = [None, {"block_sizes": [8]}]
