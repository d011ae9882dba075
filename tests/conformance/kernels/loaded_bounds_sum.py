"""An inner loop whose bounds are loaded from a tensor (`hl.tile(offsets[g], offsets[g + 1])`) summing a
3-D slab; the segment starts at 3, not a block multiple."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(5)
    return [torch.randn(128, 8, 128, generator=g), torch.tensor([3, 128], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16]))
def loaded_bounds_sum(data: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    b = offsets.size(0) - 1
    out = torch.zeros([b], dtype=data.dtype, device=data.device)
    for seg in hl.grid(b):
        lo = offsets[seg]
        hi = offsets[seg + 1]
        acc = hl.zeros([1], dtype=data.dtype)
        for t in hl.tile(lo, hi, block_size=16):
            acc = acc + data[t, :, :].sum(dim=0).sum(dim=0).sum(dim=0).unsqueeze(0)
        out[seg] = acc.squeeze(0)
    return out


def reference(data, offsets):
    return data[3:128].sum().reshape(1)


TOLERANCE = {"atol": 1e-2, "rtol": 1e-3}
