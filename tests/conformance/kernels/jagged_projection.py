"""A per-token projection over jagged segments: `x[t, :, :].transpose(0, 1)` (heads first) times a
per-head matrix loaded once per program, transposed back; segment ends are not block multiples."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(58)
    return [torch.randn(80, 2, 16, generator=g), torch.randn(2, 16, 16, generator=g),
            torch.tensor([0, 10, 33, 40, 80], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16]))
def jagged_projection(x: torch.Tensor, w: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for s in hl.grid(offsets.size(0) - 1):
        wb = w[:, :, :]
        for t in hl.tile(offsets[s], offsets[s + 1]):
            xb = x[t, :, :].transpose(0, 1)
            out[t, :, :] = torch.bmm(xb, wb).transpose(0, 1)
    return out


def reference(x, w, offsets):
    return torch.bmm(x.transpose(0, 1), w).transpose(0, 1)


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}
