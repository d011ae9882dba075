"""`if` on a device scalar inside an inner loop choosing how a carried accumulator is updated (per group: add
the rows of long groups, subtract those of short ones); both branches run, the carried value is selected."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.randn(32, 128, generator=torch.Generator().manual_seed(81)),
            torch.tensor([0, 3, 3, 20, 32], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8]))
def if_device_scalar_carried(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    groups = offsets.size(0) - 1
    out = torch.empty([groups, x.size(1)], dtype=x.dtype, device=x.device)
    for g in hl.grid(groups):
        lo = offsets[g]
        hi = offsets[g + 1]
        acc = hl.zeros([x.size(1)], dtype=torch.float32)
        for t in hl.tile(lo, hi):
            rows = x[t, :].sum(dim=0)
            if hi - lo > 4:
                acc = acc + rows
            else:
                acc = acc - 2.0 * rows
        out[g, :] = acc
    return out


def reference(x, offsets):
    res = []
    for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
        s = x[a:b].sum(0)
        res.append(s if b - a > 4 else -2.0 * s)
    return torch.stack(res)


TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}
