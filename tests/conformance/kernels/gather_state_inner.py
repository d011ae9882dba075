"""A gather of whole [3, 4, 128] states by index inside an inner loop under a one-program grid."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(14)
    return [torch.randperm(64, generator=g)[:32].to(torch.int32), torch.randn(64, 3, 4, 128, generator=g)]


@helion.kernel(static_shapes=True)
def gather_state_inner(idx: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    out = torch.empty([idx.size(0), *table.shape[1:]], dtype=table.dtype, device=table.device)
    for _ in hl.grid(1):
        for tb in hl.tile(idx.size(0)):
            out[tb, :, :, :] = table[idx[tb], :, :, :]
    return out


def reference(idx, table):
    return table[idx.long()]
