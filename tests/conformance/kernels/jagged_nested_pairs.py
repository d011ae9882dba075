"""Two nested data-dependent loops over the same segment with an inner accumulator: the sum over block
pairs of elementwise products (the value depends on the block of 32, pinned)."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(42)
    return [torch.randn(128, 4, 128, generator=g), torch.randn(128, 4, 128, generator=g),
            torch.tensor([0, 64, 128], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[32, 32]))
def jagged_nested_pairs(x: torch.Tensor, y: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    a = hl.specialize(x.size(1))
    b = hl.specialize(x.size(2))
    n = offsets.size(0) - 1
    out = torch.zeros([n, a, b], dtype=x.dtype, device=x.device)
    for s in hl.grid(n):
        lo = offsets[s]
        hi = offsets[s + 1]
        acc = hl.zeros([1, a, b], dtype=x.dtype)
        for ti in hl.tile(lo, hi):
            inner = hl.zeros([1, a, b], dtype=x.dtype)
            for tj in hl.tile(lo, hi):
                inner = inner + (x[ti, :, :] * y[tj, :, :]).sum(dim=0).unsqueeze(0)
            acc = acc + inner
        out[s, :, :] = acc.squeeze(0)
    return out


def reference(x, y, offsets):
    out = torch.zeros(2, 4, 128)
    for s in range(2):
        lo, hi = int(offsets[s]), int(offsets[s + 1])
        for i in range(lo, hi, 32):
            for j in range(lo, hi, 32):
                out[s] += (x[i:i + 32] * y[j:j + 32]).sum(0)
    return out


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}
