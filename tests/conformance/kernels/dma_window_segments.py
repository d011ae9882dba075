"""Segments of a tensor too large to keep whole in VMEM (2304 x 4 x 128 f32: 9 MiB as laid out), walked by
`hl.tile(offsets[g], offsets[g + 1])`: each step's window is copied in by DMA (double-buffered) and the rows it
writes inside its segment are copied out; empty, short and unaligned segments, one ending at the array's end."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(26)
    offsets = torch.tensor([0, 5, 5, 700, 701, 2000, 2304], dtype=torch.int32)
    return [torch.randn(2304, 4, 128, generator=g), offsets]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[256]))
def dma_window_segments(x: torch.Tensor, offsets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    out = torch.empty_like(x)
    sums = torch.empty([offsets.size(0) - 1, 4, 128], dtype=x.dtype, device=x.device)
    for g in hl.grid(offsets.size(0) - 1):
        acc = hl.zeros([4, 128], dtype=torch.float32)
        for t in hl.tile(offsets[g], offsets[g + 1]):
            rows = x[t, :, :]
            out[t, :, :] = rows * (g + 1.0)
            acc = acc + rows.sum(0)
        sums[g, :, :] = acc
    return out, sums


def reference(x, offsets):
    out = torch.empty_like(x)
    sums = torch.empty(offsets.numel() - 1, 4, 128)
    for g in range(offsets.numel() - 1):
        lo, hi = int(offsets[g]), int(offsets[g + 1])
        out[lo:hi] = x[lo:hi] * (g + 1.0)
        sums[g] = x[lo:hi].sum(0)
    return out, sums


TOLERANCE = {"atol": 1e-3, "rtol": 1e-4}
