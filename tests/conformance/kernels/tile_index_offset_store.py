"""A 1-D store at `tile.index + n // 2` next to a plain tile store: the first half from x, the second
from y."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[256], y=f32[256])
@helion.kernel(static_shapes=True)
def tile_index_offset_store(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.zeros(n, dtype=torch.float32, device=x.device)
    for t in hl.tile(n // 2):
        out[t] = x[t]
        out[t.index + n // 2] = y[t.index + n // 2]
    return out


def reference(x, y):
    return torch.cat((x[:128], y[128:]))
