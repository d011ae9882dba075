"""int64 row indices (torch's default integer dtype) gathering rows of a table: read as int32 on the device."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(11)
    return [torch.randint(0, 40, (64,), generator=g, dtype=torch.int64), torch.randn(40, 128, generator=g)]


@helion.kernel(static_shapes=True)
def int64_index_gather(idx: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    out = torch.empty([idx.size(0), table.size(1)], dtype=table.dtype, device=table.device)
    for t in hl.tile(idx.size(0)):
        out[t, :] = table[idx[t], :] * 2.0
    return out


def reference(idx, table):
    return table[idx] * 2.0
