"""Ragged sequences packed along the leading dim of [tokens, heads, d] (lengths 1, 7, 4, 13; every tile
is a partial block of 32): the store must not spill into the neighbouring sequence."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.randn(25, 8, 128, generator=torch.Generator().manual_seed(37)),
            torch.tensor([0, 1, 8, 12, 25], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[32]))
def jagged_ragged_leading(x: torch.Tensor, cu: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for s in hl.grid(cu.size(0) - 1):
        lo = cu[s]
        hi = cu[s + 1]
        for t in hl.tile(lo, hi):
            out[t, :, :] = x[t, :, :] * 2.0 + 1.0
    return out


def reference(x, cu):
    return x * 2.0 + 1.0
