"""Sub-tiling a launch-grid tile to scale rows by a [M, 1] column, M a multiple of the block."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[64, 128], r=f32[64, 1])
@helion.kernel(static_shapes=True)
def subtile_row_scale_even(x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    m, _ = x.shape
    out = torch.empty_like(x)
    for outer in hl.tile(m, block_size=8):
        for rows in hl.tile(outer.begin, outer.end):
            out[rows, :] = x[rows, :] * r[rows, :]
    return out


def reference(x, r):
    return x * r


CONFIGS = [None, {"pallas_load_buffer_count": [2, 2]}]
