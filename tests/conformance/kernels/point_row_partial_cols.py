"""A constant row index with a column tile larger than the row (20 columns, block 128)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[1, 20])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[128]))
def point_row_partial_cols(x: torch.Tensor) -> torch.Tensor:
    _, m = x.shape
    out = torch.zeros_like(x)
    for tm in hl.tile(m):
        out[0, tm] = x[0, tm] * 2.0
    return out


def reference(x):
    return x * 2.0
