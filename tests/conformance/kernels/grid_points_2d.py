"""A 2-D `hl.grid([n, m])`: one element per program, in both grid orders."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[2, 8])
@helion.kernel(static_shapes=True)
def grid_points_2d(x: torch.Tensor) -> torch.Tensor:
    n, m = x.size()
    out = torch.zeros_like(x)
    for i, j in hl.grid([n, m]):
        out[i, j] = x[i, j] * 3.0
    return out


def reference(x):
    return x * 3.0


CONFIGS = [None, {"loop_orders": [[1, 0]]}]
