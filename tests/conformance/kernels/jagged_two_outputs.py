"""One jagged tile feeding two outputs; groups share a block boundary (offsets 0, 3, 16)."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.tensor([0, 3, 16], dtype=torch.int32), torch.randn(16, 128, generator=torch.Generator().manual_seed(47))]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16, 128]))
def jagged_two_outputs(offsets: torch.Tensor, jagged: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    rows, d = jagged.shape
    groups = offsets.shape[0] - 1
    plus = torch.empty((rows, d), dtype=jagged.dtype, device=jagged.device)
    times = torch.empty((rows, d), dtype=jagged.dtype, device=jagged.device)
    for g in hl.grid(groups):
        lo, hi = offsets[g], offsets[g + 1]
        for st in hl.tile(lo, hi):
            for dt in hl.tile(0, d):
                v = jagged[st, dt]
                plus[st, dt] = v + 1.0
                times[st, dt] = v * 3.0
    return plus, times


def reference(offsets, jagged):
    return jagged + 1.0, jagged * 3.0
