"""A one-hot gather from a table holding -inf, inf and NaN entries (a bias table with masked positions): in the
selection matmul 0 * inf is NaN, so the non-finite entries are selected separately."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(3)
    table = torch.randn(16, 128, generator=g)
    table[3, 5] = float("-inf")
    table[7, :] = float("inf")
    table[9, 2] = float("nan")
    return [torch.randint(0, 16, (32,), generator=g, dtype=torch.int32), table]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8]))
def gather_non_finite(idx: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    out = torch.empty([idx.size(0), table.size(1)], dtype=table.dtype, device=table.device)
    for t in hl.tile(idx.size(0)):
        out[t, :] = table[idx[t], :]
    return out


def reference(idx, table):
    return table[idx.long()]
