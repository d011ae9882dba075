"""Rows `start + hl.arange(32)` with `start` read from a tensor, masked by `rows < end`, where a window runs past
the end of the tensor (a group starting 24 rows before it): the positions must stay where the mask puts them
(a window read at a start clamped into the tensor would shift them), and rows past the end are neither read
nor written."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(5)
    return [torch.randn(80, 128, generator=g), torch.tensor([0, 16, 16, 56, 80], dtype=torch.int32)]


@helion.kernel(static_shapes=True)
def window_device_start_past_end(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for g in hl.grid(offsets.size(0) - 1):
        start = offsets[g]
        end = offsets[g + 1]
        rows = start + hl.arange(32)
        valid = (rows < end)[:, None]
        v = hl.load(x, [rows, slice(None)], extra_mask=valid)
        hl.store(out, [rows, slice(None)], v * 2.0 + 1.0, extra_mask=valid)
    return out


def reference(x, offsets):
    out = torch.zeros_like(x)
    for s, e in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
        e = min(e, s + 32)  # each group's window covers at most 32 rows
        out[s:e] = x[s:e] * 2.0 + 1.0
    return out
