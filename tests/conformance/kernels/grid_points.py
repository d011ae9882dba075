"""`hl.grid` over a 1-D tensor: one element per program (`out[i] = x[i] + c`)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[16])
@helion.kernel(static_shapes=True)
def grid_points(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.zeros_like(x)
    for i in hl.grid(n):
        out[i] = x[i] + 0.25
    return out


def reference(x):
    return x + 0.25
