"""An output slice read-modified-written inside two nested data-dependent loops (`out[s] = out[s] + ...`)."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(43)
    return [torch.randn(128, 4, 128, generator=g), torch.randn(128, 4, 128, generator=g),
            torch.tensor([0, 64, 128], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[32, 32]))
def jagged_nested_rmw(x: torch.Tensor, y: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    a = hl.specialize(x.size(1))
    b = hl.specialize(x.size(2))
    n = offsets.size(0) - 1
    out = torch.zeros([n, a, b], dtype=x.dtype, device=x.device)
    for s in hl.grid(n):
        lo = offsets[s]
        hi = offsets[s + 1]
        for ti in hl.tile(lo, hi):
            for tj in hl.tile(lo, hi):
                out[s, :, :] = out[s, :, :] + x[ti, :, :].sum(dim=0) + y[tj, :, :].sum(dim=0)
    return out


def reference(x, y, offsets):
    out = torch.zeros(2, 4, 128)
    for s in range(2):
        lo, hi = int(offsets[s]), int(offsets[s + 1])
        for i in range(lo, hi, 32):
            for j in range(lo, hi, 32):
                out[s] += x[i:i + 32].sum(0) + y[j:j + 32].sum(0)
    return out


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}
