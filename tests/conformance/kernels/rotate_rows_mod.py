"""Rows rotated by one with a parenthesised modulo (`x[(t.begin - 1) % 4, :]`) under a one-program grid
and a block-1 inner loop."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[5, 128])
@helion.kernel(static_shapes=True)
def rotate_rows_mod(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([4, x.size(1)], dtype=x.dtype, device=x.device)
    for _ in hl.grid(1):
        for t in hl.tile(4, block_size=1):
            out[t.begin, :] = x[(t.begin - 1) % 4, :]
    return out


def reference(x):
    return x[[3, 0, 1, 2]]
