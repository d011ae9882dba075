"""Each `hl.grid` program reads its own scalar from a small table (`shift[g]`) and streams an inner loop
with it; the output is an argument written by every program, so the last program's value wins."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(2)
    return [torch.tensor([0.5, -3.0, 7.25, 12.0]), torch.randn(512, generator=g), torch.zeros(512)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[128]))
def grid_scalar_table(shift: torch.Tensor, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    groups = shift.size(0)
    n = x.size(0)
    for g in hl.grid(groups):
        s = shift[g]
        for t in hl.tile(n):
            out[t] = x[t] + s
    return out


def reference(shift, x, out):
    out.copy_(x + shift[-1])
    return out
