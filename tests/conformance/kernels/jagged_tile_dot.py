"""A matmul contracting an `hl.jagged_tile` dim: row r of `a` uses only its first lengths[r] columns of the
shared weight (`a[rows, k] @ w[k, :]`), so the jagged mask sits on one operand of the dot only."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(74)
    return [torch.randn(16, 384, generator=g), torch.randn(384, 128, generator=g),
            torch.tensor([384, 0, 5, 133, 256, 1, 383, 129, 128, 8, 2, 17, 300, 64, 12, 255], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16, 128]))
def jagged_tile_dot(a: torch.Tensor, w: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    m = a.size(0)
    n = w.size(1)
    out = torch.empty([m, n], dtype=torch.float32, device=a.device)
    for tm in hl.tile(m):
        acc = hl.zeros([tm, n], dtype=torch.float32)
        for tk in hl.jagged_tile(lengths[tm]):
            acc = torch.addmm(acc, a[tm, tk], w[tk, :])
        out[tm, :] = acc
    return out


def reference(a, w, lengths):
    keep = torch.arange(a.size(1))[None, :] < lengths[:, None]
    return torch.where(keep, a, 0.0) @ w


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}
