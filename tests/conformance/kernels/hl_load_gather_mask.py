"""`hl.load` of rows chosen by an index tile with an `extra_mask` on the index (all indices valid here)."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(26)
    return [torch.randperm(64, generator=g)[:32].to(torch.int32), torch.randn(64, 2, 128, generator=g)]


@helion.kernel(static_shapes=True)
def hl_load_gather_mask(idx: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    out = torch.empty([idx.size(0), *table.shape[1:]], dtype=table.dtype, device=table.device)
    for tb in hl.tile(idx.size(0)):
        sel = idx[tb]
        out[tb, :, :] = hl.load(table, [sel, slice(None), slice(None)], extra_mask=(sel >= 0)[:, None, None])
    return out


def reference(idx, table):
    return table[idx.long()]
