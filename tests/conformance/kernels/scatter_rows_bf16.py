"""A scatter store through a permutation, bf16 values, several row blocks."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(19)
    return [torch.randn(32, 128, generator=g).to(torch.bfloat16), torch.randperm(32, generator=g).to(torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16, 128]))
def scatter_rows_bf16(values: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(values)
    for tm, tn in hl.tile(values.size()):
        out[idx[tm], tn] = values[tm, tn]
    return out


def reference(values, idx):
    out = torch.zeros_like(values)
    out[idx.long()] = values
    return out
