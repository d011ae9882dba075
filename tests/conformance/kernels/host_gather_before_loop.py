"""A gather in host code (`x[idx]`) before the device loop; the gathered tensor is only read on device."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.randn(256, generator=torch.Generator().manual_seed(23)), torch.arange(255, -1, -1, dtype=torch.int32)]


@helion.kernel(static_shapes=True)
def host_gather_before_loop(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    picked = x[idx]
    out = torch.empty_like(picked)
    for t in hl.tile(out.size()):
        out[t] = picked[t] + 1.0
    return out


def reference(x, idx):
    return x[idx.long()] + 1.0
