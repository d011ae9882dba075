"""A scatter at a partial tile's positions (`out[idx[t]] = x[t]`, 20 positions in blocks of 8): the padding
positions of the last block write nothing (their index reads are padding too); values hold inf and -inf."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(25)
    x = torch.randn(20, 128, generator=g)
    x[3, 7], x[17, 0] = float("inf"), float("-inf")
    return [x, torch.randperm(24, generator=g)[:20].to(torch.int32), torch.zeros(24, 128)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8]))
def scatter_partial_tile(x: torch.Tensor, idx: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for t in hl.tile(x.size(0)):
        out[idx[t], :] = x[t, :] + 1.0
    return out


def reference(x, idx, out):
    out[idx.long()] = x + 1.0
    return out
