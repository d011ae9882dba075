"""Sub-tiling: an inner hl.tile(outer.begin, outer.end) walks the rows of each launch-grid tile; tile.index inside."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[256, 128])
@helion.kernel(static_shapes=True)
def subtile_rows(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty_like(x)
    for outer in hl.tile(m):
        for inner in hl.tile(outer.begin, outer.end):
            rows = inner.index.to(torch.float32)
            out[inner, :] = x[inner, :] * 2.0 + rows[:, None]
    return out


def reference(x):
    return x * 2.0 + torch.arange(x.size(0), dtype=torch.float32)[:, None]

SMALL = {"x": "f32[256, 128]"}
