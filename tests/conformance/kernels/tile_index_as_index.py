"""`tile.index` (the vector of positions) used as the subscript of a load and a store."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[1024])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[256]))
def tile_index_as_index(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t.index] = x[t.index] * 4.0
    return out


def reference(x):
    return x * 4.0
