"""A scatter store with repeated indices in one block: the last write to a row wins, as in torch; rows no
index names stay zero."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(20)
    idx = torch.tensor([0, 2, 2, 3, 5, 5, 5, 9, 9, 10, 11, 11, 12, 13, 15, 15], dtype=torch.int32)
    return [torch.randn(16, 128, generator=g), idx]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16, 128]))
def scatter_duplicates(values: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(values)
    for tm, tn in hl.tile(values.size()):
        out[idx[tm], tn] = values[tm, tn]
    return out


def reference(values, idx):
    out = torch.zeros_like(values)
    for row in range(values.size(0)):
        out[int(idx[row])] = values[row]
    return out
