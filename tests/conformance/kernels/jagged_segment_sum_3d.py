"""Per-segment sums of a jagged 3-D tensor (offsets from a cumulative sum of random lengths)."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(40)
    lengths = torch.randint(1, 40, (6,), generator=g, dtype=torch.int32)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int32), torch.cumsum(lengths, 0).to(torch.int32)])
    return [torch.randn(int(offsets[-1]), 4, 128, generator=g), offsets]


@helion.kernel(static_shapes=True)
def jagged_segment_sum_3d(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    n = offsets.size(0) - 1
    out = torch.zeros([n], dtype=x.dtype, device=x.device)
    for s in hl.grid(n):
        lo = offsets[s]
        hi = offsets[s + 1]
        acc = hl.zeros([1], dtype=x.dtype)
        for t in hl.tile(lo, hi):
            acc = acc + x[t, :, :].sum(dim=0).sum(dim=0).sum(dim=0).unsqueeze(0)
        out[s] = acc.squeeze(0)
    return out


def reference(x, offsets):
    return torch.stack([x[int(a):int(b)].sum() for a, b in zip(offsets[:-1], offsets[1:], strict=True)])


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}
