"""A jagged row range times a dense matrix, column sums accumulated (`(y[t, :] @ w).sum(0)`); 50 rows in
blocks of 32, so the padded rows of the last block must not count."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(60)
    return [torch.randn(128, 96, generator=g), torch.randn(96, 48, generator=g), torch.tensor([0, 50], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[32]))
def jagged_matmul_colsum(y: torch.Tensor, w: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    n = offsets.size(0) - 1
    d = w.size(1)
    out = torch.zeros([n, d], dtype=y.dtype, device=y.device)
    for s in hl.grid(n):
        lo = offsets[s]
        hi = offsets[s + 1]
        acc = hl.zeros([d], dtype=y.dtype)
        for t in hl.tile(lo, hi):
            acc = acc + torch.matmul(y[t, :], w[:, :]).sum(dim=0)
        out[s, :] = acc
    return out


def reference(y, w, offsets):
    return (y[0:50] @ w).sum(0, keepdim=True)


TOLERANCE = {"atol": 1e-2, "rtol": 1e-3}
