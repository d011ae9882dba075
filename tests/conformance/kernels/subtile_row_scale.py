"""Sub-tiling a launch-grid tile (`hl.tile(t.begin, t.end)`) to scale rows by a [M, 1] column, with M (70)
not a multiple of the block (8)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[70, 128], r=f32[70, 1])
@helion.kernel(static_shapes=True)
def subtile_row_scale(x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    m, _ = x.shape
    out = torch.empty_like(x)
    for outer in hl.tile(m, block_size=8):
        for rows in hl.tile(outer.begin, outer.end):
            out[rows, :] = x[rows, :] * r[rows, :]
    return out


def reference(x, r):
    return x * r
