"""Long rows summed one row per grid step: a pinned block of 1 on a 1-D output, which is not a legal TPU
block (upstream raises it to the nearest legal size)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[8, 8192])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[1]))
def sum_rows_block1(x: torch.Tensor) -> torch.Tensor:
    n = x.size(0)
    out = torch.empty([n], dtype=x.dtype, device=x.device)
    for t in hl.tile(n):
        out[t] = x[t, :].sum(-1)
    return out


def reference(x):
    return x.sum(-1)


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}
