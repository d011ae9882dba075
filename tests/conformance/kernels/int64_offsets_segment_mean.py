"""int64 offsets (as torch.cumsum makes them), only read on the device: read as int32 after the call checks
they fit; segment means, an empty segment included."""
import helion
import helion.language as hl
import torch


def inputs():
    lengths = torch.tensor([5, 0, 17, 9, 1], dtype=torch.long)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(lengths, 0)])
    return [offsets, torch.randn(32, 256, generator=torch.Generator().manual_seed(7))]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[128, 8]))
def segment_mean_int64_offsets(offsets: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    groups = offsets.size(0) - 1
    d = values.size(1)
    out = torch.zeros([groups, d], dtype=values.dtype, device=values.device)
    for g in hl.grid(groups):
        lo = offsets[g]
        hi = offsets[g + 1]
        for dt in hl.tile(d):
            acc = hl.zeros([dt], dtype=torch.float32)
            for st in hl.tile(lo, hi):
                acc = acc + values[st, dt].sum(0)
            count = (hi - lo).to(torch.float32)
            out[g, dt] = torch.where(count > 0, acc / count, 0.0)
    return out


def reference(offsets, values):
    out = torch.zeros(offsets.numel() - 1, values.size(1))
    for g, (a, b) in enumerate(zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)):
        if b > a:
            out[g] = values[a:b].mean(0)
    return out
