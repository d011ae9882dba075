"""A gather whose index tensor is read one past the tile (`idx[tb + 1]`)."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(15)
    return [torch.randint(0, 32, (33,), generator=g, dtype=torch.int32), torch.randn(32, 2, 128, generator=g)]


@helion.kernel(static_shapes=True)
def gather_shifted_index(idx: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    out = torch.empty([idx.size(0) - 1, *table.shape[1:]], dtype=table.dtype, device=table.device)
    for _ in hl.grid(1):
        for tb in hl.tile(idx.size(0) - 1):
            out[tb, :, :] = table[idx[tb + 1], :, :]
    return out


def reference(idx, table):
    return table[idx[1:].long()]
