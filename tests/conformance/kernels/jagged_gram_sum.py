"""Two nested data-dependent tiles feeding a matmul (`x[ti, :] @ y[tj, :].T`) summed per segment."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(44)
    return [torch.randn(128, 128, generator=g), torch.randn(128, 128, generator=g),
            torch.tensor([0, 40, 128], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[32, 32]))
def jagged_gram_sum(x: torch.Tensor, y: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    n = offsets.size(0) - 1
    out = torch.zeros([n], dtype=x.dtype, device=x.device)
    for s in hl.grid(n):
        lo = offsets[s]
        hi = offsets[s + 1]
        acc = hl.zeros([1], dtype=x.dtype)
        for ti in hl.tile(lo, hi):
            for tj in hl.tile(lo, hi):
                gram = torch.matmul(x[ti, :], y[tj, :].transpose(-2, -1))
                acc = acc + gram.sum(dim=0).sum(dim=0).unsqueeze(0)
        out[s] = acc.squeeze(0)
    return out


def reference(x, y, offsets):
    return torch.stack([(x[int(a):int(b)] @ y[int(a):int(b)].T).sum()
                        for a, b in zip(offsets[:-1], offsets[1:], strict=True)])


TOLERANCE = {"atol": 5e-2, "rtol": 1e-3}
