"""A loop whose range is read on the device and starts before 0 (`hl.tile(lo, hi)`, lo = -5, two 128-row
steps): its window is clamped up to row 0, and each row of the tensor inside [lo, hi) is summed exactly once
(positions before 0 do not exist); the first step must not count again the rows its clamped window shares with
the second step's range."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(3, 256, 128, generator=g)
    starts = torch.tensor([-5, 0, 150], dtype=torch.int32)
    return [x, starts]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[128]))
def device_range_before_zero(x: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
    G, N, D = x.size()
    out = torch.empty([G, D], dtype=torch.float32, device=x.device)
    for tg, td in hl.tile([G, D], block_size=[1, D]):
        acc = hl.zeros([td], dtype=torch.float32)
        lo = starts[tg.begin]
        hi = torch.minimum(lo + 200, lo.new_full([], N))
        for tn in hl.tile(lo, hi):
            acc = acc + x[tg.begin, tn, td].sum(0)
        out[tg.begin, td] = acc
    return out


def reference(x, starts):
    n = x.size(1)
    return torch.stack([x[g, max(s, 0):min(s + 200, n)].sum(0) for g, s in enumerate(starts.tolist())])
