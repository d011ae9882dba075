"""`hl.full` in an inner loop whose blocks (128 rows, 64 columns) exceed the tensor (64 x 32)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[64, 32])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[128, 64]))
def full_inner_block_over_extent(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in hl.tile(m):
        for tn in hl.tile(n):
            out[tm, tn] = hl.full([tm, tn], 3.0, dtype=x.dtype)
    return out


def reference(x):
    return torch.full_like(x, 3.0)
