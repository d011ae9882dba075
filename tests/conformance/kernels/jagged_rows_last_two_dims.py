"""Data-dependent row bounds (separate start and end tensors) on a 2-D tensor, where the ragged dim is a
sublane dim."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.randn(16, 128, generator=torch.Generator().manual_seed(38)),
            torch.tensor([0, 5], dtype=torch.int32), torch.tensor([5, 16], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8]))
def jagged_rows_last_two_dims(x: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for g in hl.grid(starts.size(0)):
        lo = starts[g]
        hi = ends[g]
        for t in hl.tile(lo, hi):
            out[t, :] = x[t, :] - 1.0
    return out


def reference(x, starts, ends):
    return x - 1.0
