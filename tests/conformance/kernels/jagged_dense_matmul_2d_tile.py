"""Jagged times dense with one 2-D loop over (rows, columns) given as tuples of bounds
(`hl.tile((s, 0), (e, K))`), bf16, an empty group in the middle."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(46)
    return [torch.tensor([0, 5, 5, 16], dtype=torch.int32), torch.randn(16, 128, generator=g).to(torch.bfloat16),
            torch.randn(3, 128, 128, generator=g).to(torch.bfloat16)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16, 128, 128]))
def jagged_dense_matmul_2d_tile(offsets: torch.Tensor, jagged: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
    rows, d = jagged.shape
    groups, _, k = dense.shape
    out = torch.empty((rows, k), dtype=jagged.dtype, device=jagged.device)
    for g in hl.grid(groups):
        lo = offsets[g]
        hi = offsets[g + 1]
        for st, kt in hl.tile((lo, 0), (hi, k)):
            acc = hl.zeros([st, kt], dtype=torch.float32)
            for dt in hl.tile(0, d):
                acc = acc + torch.matmul(jagged[st, dt], dense[g, dt, kt])
            out[st, kt] = acc
    return out


def reference(offsets, jagged, dense):
    parts = [(jagged[int(a):int(b)].float() @ dense[g].float()).to(torch.bfloat16)
             for g, (a, b) in enumerate(zip(offsets[:-1], offsets[1:], strict=True))]
    return torch.cat(parts)
