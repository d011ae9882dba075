"""Per-owner sums over a jagged row range of the owner's own slab (`x[g, t, :, :]`), empty ranges included."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.randn(3, 48, 4, 128, generator=torch.Generator().manual_seed(41)),
            torch.tensor([0, 0, 11, 37], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8]))
def jagged_owner_slab_sum(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    n = offsets.size(0) - 1
    h = hl.specialize(x.size(2))
    d = hl.specialize(x.size(3))
    out = torch.empty([n, h, d], dtype=torch.float32, device=x.device)
    for g in hl.grid(n):
        lo = offsets[g]
        hi = offsets[g + 1]
        acc = hl.zeros([h, d], dtype=torch.float32)
        for t in hl.tile(lo, hi):
            acc = acc + x[g, t, :, :].to(torch.float32).sum(dim=0)
        out[g, :, :] = acc
    return out


def reference(x, offsets):
    return torch.stack([x[g, int(offsets[g]):int(offsets[g + 1])].sum(0) for g in range(3)])


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}
