"""An output that is also an input, updated one row per `hl.grid` program (`x[r, :] = x[r, :] + r + 5`)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[4, 128])
@helion.kernel(static_shapes=True)
def grid_row_update_inplace(x: torch.Tensor) -> torch.Tensor:
    for r in hl.grid(x.size(0)):
        x[r, :] = x[r, :] + (r + 5)
    return x


def reference(x):
    x += torch.arange(5, 5 + x.size(0), dtype=x.dtype)[:, None]
    return x
