"""Bounds loaded at literal positions (`offsets[0]`, `offsets[1]`) and a literal leading index
(`x[1, t, :, :]`) under a one-program grid."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.randn(3, 48, 4, 128, generator=torch.Generator().manual_seed(57)),
            torch.tensor([3, 29], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8]))
def literal_offsets_slab_sum(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    h = hl.specialize(x.size(2))
    d = hl.specialize(x.size(3))
    out = torch.empty([1, h, d], dtype=torch.float32, device=x.device)
    for owner in hl.grid(1):
        lo = offsets[0]
        hi = offsets[1]
        acc = hl.zeros([h, d], dtype=torch.float32)
        for t in hl.tile(lo, hi):
            acc = acc + x[1, t, :, :].to(torch.float32).sum(dim=0)
        out[owner, :, :] = acc
    return out


def reference(x, offsets):
    return x[1, 3:29].sum(0, keepdim=True)


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}
