"""A row gather through an index tensor loaded by the row tile (`values[idx[tm], tn]`), a permutation."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(7)
    return [torch.randn(16, 128, generator=g), torch.randperm(16, generator=g).to(torch.int32)]


@helion.kernel(static_shapes=True)
def gather_rows_tiled(values: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    out = torch.empty([idx.size(0), values.size(1)], dtype=values.dtype, device=values.device)
    for tm, tn in hl.tile(out.size()):
        out[tm, tn] = values[idx[tm], tn]
    return out


def reference(values, idx):
    return values[idx.long()]


CONFIGS = [None, {"block_sizes": [8, 128]}]
