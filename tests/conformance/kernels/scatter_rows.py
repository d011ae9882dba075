"""A scatter store through a permutation (`out[idx[tm], tn] = values[tm, tn]`) into a zeroed output."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(18)
    return [torch.randn(16, 128, generator=g), torch.randperm(16, generator=g).to(torch.int32)]


@helion.kernel(static_shapes=True)
def scatter_rows(values: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(values)
    for tm, tn in hl.tile(values.size()):
        out[idx[tm], tn] = values[tm, tn]
    return out


def reference(values, idx):
    out = torch.zeros_like(values)
    out[idx.long()] = values
    return out


CONFIGS = [None, {"block_sizes": [8, 128]}]
