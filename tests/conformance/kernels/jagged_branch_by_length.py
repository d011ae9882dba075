"""An `if` on a device scalar (the group's length, `e - s > 8`) choosing the store inside a jagged tile."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.tensor([0, 3, 16], dtype=torch.int32), torch.randn(16, 128, generator=torch.Generator().manual_seed(48))]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16, 128]))
def jagged_branch_by_length(offsets: torch.Tensor, jagged: torch.Tensor) -> torch.Tensor:
    rows, d = jagged.shape
    groups = offsets.shape[0] - 1
    out = torch.empty((rows, d), dtype=jagged.dtype, device=jagged.device)
    for g in hl.grid(groups):
        lo = offsets[g]
        hi = offsets[g + 1]
        for st in hl.tile(lo, hi):
            for dt in hl.tile(0, d):
                v = jagged[st, dt]
                if hi - lo > 8:
                    out[st, dt] = v + 1.0
                else:
                    out[st, dt] = v * 2.0
    return out


def reference(offsets, jagged):
    out = torch.empty_like(jagged)
    for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
        out[a:b] = jagged[a:b] + 1.0 if b - a > 8 else jagged[a:b] * 2.0
    return out
