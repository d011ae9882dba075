"""Rows picked as `t.begin + hl.arange(8)` (a window the size of the tile), then the first 128 lanes of it."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[16, 256])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8]))
def row_window_from_begin(x: torch.Tensor) -> torch.Tensor:
    rows = hl.specialize(x.size(0))
    out = torch.empty([rows, 128], dtype=x.dtype, device=x.device)
    for tm in hl.tile(rows):
        window = x[tm.begin + hl.arange(8), :]
        out[tm, :] = window[:, hl.arange(128)] + 1
    return out


def reference(x):
    return x[:, :128] + 1
