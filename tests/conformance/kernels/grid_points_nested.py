"""Nested `hl.grid` loops (an inner `hl.grid` inside the launch grid), one element per inner step."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[8, 16])
@helion.kernel(static_shapes=True)
def grid_points_nested(x: torch.Tensor) -> torch.Tensor:
    n, m = x.size()
    out = torch.zeros_like(x)
    for i in hl.grid(n):
        for j in hl.grid(m):
            out[i, j] = x[i, j] - 1.0
    return out


def reference(x):
    return x - 1.0
