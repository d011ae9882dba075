"""Nested `if`s on values read on the device, with stores only under them: a row is written only where both
conditions hold (the flag is set and its scale is positive); other rows of the zero-filled output stay zero."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(82)
    return [torch.randn(16, 256, generator=g), torch.tensor([1, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1, 0, 0, 1, 1, 1],
                                                            dtype=torch.int32),
            torch.randn(16, generator=g)]


@helion.kernel(static_shapes=True)
def if_device_nested_stores(x: torch.Tensor, flags: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for r in hl.grid(x.size(0)):
        if flags[r]:
            s = scale[r]
            if s > 0:
                out[r, :] = x[r, :] * s
            else:
                out[r, :] = -x[r, :]
    return out


def reference(x, flags, scale):
    out = torch.zeros_like(x)
    for r in range(x.size(0)):
        if flags[r]:
            out[r] = x[r] * scale[r] if scale[r] > 0 else -x[r]
    return out
