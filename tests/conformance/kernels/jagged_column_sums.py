"""A reduction over a jagged row range into a dense [groups, D] output (the jagged loop innermost), bf16."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.tensor([0, 13, 25], dtype=torch.int32),
            torch.randn(25, 128, generator=torch.Generator().manual_seed(49)).to(torch.bfloat16)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[128, 16]))
def jagged_column_sums(offsets: torch.Tensor, jagged: torch.Tensor) -> torch.Tensor:
    _, d = jagged.shape
    groups = offsets.shape[0] - 1
    out = torch.zeros((groups, d), dtype=torch.float32, device=jagged.device)
    for g in hl.grid(groups):
        lo = offsets[g]
        hi = offsets[g + 1]
        for dt in hl.tile(0, d):
            acc = hl.zeros([dt], dtype=torch.float32)
            for st in hl.tile(lo, hi):
                acc = acc + jagged[st, dt].to(torch.float32).sum(0)
            out[g, dt] = acc
    return out


def reference(offsets, jagged):
    return torch.stack([jagged[0:13].float().sum(0), jagged[13:25].float().sum(0)])


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}
