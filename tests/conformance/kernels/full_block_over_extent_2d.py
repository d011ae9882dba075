"""`hl.full` over a 2-D tile whose blocks (128, 256) exceed both extents (100, 200)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[100, 200])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[128, 256]))
def full_block_over_extent_2d(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in hl.tile([m, n]):
        out[tm, tn] = hl.full([tm, tn], -2.0, dtype=x.dtype)
    return out


def reference(x):
    return torch.full_like(x, -2.0)
