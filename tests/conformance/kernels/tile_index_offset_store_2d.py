"""Quadrant copies with `tile.index + n // 2` on rows and `tile + m // 2` on columns."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[64, 256], y=f32[64, 256])
@helion.kernel(static_shapes=True)
def tile_index_offset_store_2d(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    n, m = x.size()
    out = torch.zeros(x.size(), dtype=torch.float32, device=x.device)
    for t1, t2 in hl.tile([n // 2, m // 2]):
        out[t1, t2] = x[t1, t2]
        out[t1.index + n // 2, t2] = y[t1.index + n // 2, t2]
        out[t1, t2 + m // 2] = x[t1, t2 + m // 2]
        out[t1.index + n // 2, t2 + m // 2] = y[t1.index + n // 2, t2 + m // 2]
    return out


def reference(x, y):
    return torch.cat((x[:32], y[32:]))
