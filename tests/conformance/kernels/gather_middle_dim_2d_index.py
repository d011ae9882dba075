"""A gather along a middle dim with a 2-D index (`table[ta, idx[tb, ts], tc]`): output [A, B, S, C]."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(12)
    return [torch.randint(0, 8, (2, 8), generator=g, dtype=torch.int32),
            torch.randn(4, 8, 128, generator=g).to(torch.bfloat16)]


@helion.kernel(static_shapes=True)
def gather_middle_dim_2d_index(idx: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    a, c = table.size(0), table.size(2)
    b, s = idx.size(0), idx.size(1)
    out = torch.empty([a, b, s, c], dtype=table.dtype, device=table.device)
    for ta, tb, ts, tc in hl.tile([a, b, s, c]):
        out[ta, tb, ts, tc] = table[ta, idx[tb, ts], tc]
    return out


def reference(idx, table):
    return table[:, idx.long(), :]
