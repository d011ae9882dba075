"""Jagged times dense: each group's rows (`hl.tile(s, e)` from offsets) times that group's matrix, with
nested column and K loops; group boundaries are not block multiples."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(45)
    return [torch.tensor([0, 13, 40, 71], dtype=torch.int32), torch.randn(71, 128, generator=g),
            torch.randn(3, 128, 256, generator=g)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16, 128, 128]))
def jagged_dense_matmul(offsets: torch.Tensor, jagged: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
    rows, d = jagged.shape
    groups, _, k = dense.shape
    out = torch.empty((rows, k), dtype=jagged.dtype, device=jagged.device)
    for g in hl.grid(groups):
        lo = offsets[g]
        hi = offsets[g + 1]
        for st in hl.tile(lo, hi):
            for kt in hl.tile(0, k):
                acc = hl.zeros([st, kt], dtype=torch.float32)
                for dt in hl.tile(0, d):
                    acc = acc + torch.matmul(jagged[st, dt], dense[g, dt, kt])
                out[st, kt] = acc
    return out


def reference(offsets, jagged, dense):
    return torch.cat([jagged[int(a):int(b)] @ dense[g]
                      for g, (a, b) in enumerate(zip(offsets[:-1], offsets[1:], strict=True))])


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}
