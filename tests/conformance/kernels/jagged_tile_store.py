"""A store inside `hl.jagged_tile`: each row writes only its first lengths[row] positions; the rest of the
zero-initialised output must stay zero (the block written spans every row's window)."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.randn(8, 32, 128, generator=torch.Generator().manual_seed(72)),
            torch.tensor([3, 32, 0, 9, 16, 1, 31, 8], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8, 8]))
def jagged_tile_store(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    b = x.size(0)
    out = torch.zeros_like(x)
    for tb in hl.tile(b):
        n = lengths[tb]
        for tk in hl.jagged_tile(n):
            out[tb, tk, :] = torch.sigmoid(x[tb, tk, :]) * 2.0
    return out


def reference(x, lengths):
    out = torch.zeros_like(x)
    for r, n in enumerate(lengths.tolist()):
        out[r, :n] = torch.sigmoid(x[r, :n]) * 2.0
    return out
