"""Jagged segments: `hl.grid` over segments and an inner `hl.tile(offsets[g], offsets[g + 1])` whose bounds
are loaded from a tensor and are not block multiples."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.randn(48, 128, generator=torch.Generator().manual_seed(36)),
            torch.tensor([0, 11, 29, 48], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16]))
def jagged_segment_add(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for g in hl.grid(offsets.size(0) - 1):
        lo = offsets[g]
        hi = offsets[g + 1]
        for t in hl.tile(lo, hi):
            out[t, :] = x[t, :] + 1.0
    return out


def reference(x, offsets):
    return x + 1.0
