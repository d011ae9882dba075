"""Rows addressed as `tk.index + tc.begin * chunk` (an inner tile index plus an offset from a launch-grid
tile with block size 1)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[256, 128])
@helion.kernel(static_shapes=True)
def chunk_row_offset(x: torch.Tensor) -> torch.Tensor:
    nrows, ncols = x.shape
    chunk = 64
    out = torch.empty_like(x)
    for tcol, tc in hl.tile([ncols, nrows // chunk], block_size=[None, 1]):
        for tk in hl.tile(chunk, block_size=64):
            rows = tk.index + tc.begin * chunk
            out[rows, tcol] = x[rows, tcol] - 2.0
    return out


def reference(x):
    return x - 2.0
