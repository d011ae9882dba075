"""A boolean per-row mask reshaped with `.view(block, 1)` and expanded to the tile, then `torch.where`."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[32, 256])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16, 128]))
def where_row_mask(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in hl.tile([m, n]):
        keep = x[tm, 0] > 0
        keep2d = keep.view(tm.block_size, 1).expand(tm.block_size, tn.block_size)
        out[tm, tn] = torch.where(keep2d, x[tm, tn], 0.0)
    return out


def reference(x):
    return torch.where(x[:, :1] > 0, x, torch.zeros_like(x))
