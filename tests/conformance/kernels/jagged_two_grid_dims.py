"""Jagged rows under a 2-D `hl.grid([2, groups])`: the group index is the second grid dim."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.tensor([0, 13, 25], dtype=torch.int32),
            torch.randn(25, 128, generator=torch.Generator().manual_seed(50))]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16, 128]))
def jagged_two_grid_dims(offsets: torch.Tensor, jagged: torch.Tensor) -> torch.Tensor:
    rows, d = jagged.shape
    groups = offsets.shape[0] - 1
    out = torch.zeros((2, rows, d), dtype=jagged.dtype, device=jagged.device)
    for rep, g in hl.grid([2, groups]):
        lo = offsets[g]
        hi = offsets[g + 1]
        for st in hl.tile(lo, hi):
            for dt in hl.tile(0, d):
                out[rep, st, dt] = jagged[st, dt] * (rep + 1)
    return out


def reference(offsets, jagged):
    return torch.stack([jagged, jagged * 2])
