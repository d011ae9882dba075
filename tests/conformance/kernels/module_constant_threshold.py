"""A module-level constant read inside the kernel (`torch.where(v > THRESHOLD, v, 0.0)`)."""
import helion
import helion.language as hl
import torch

THRESHOLD = 0.25


# helion: args(x=f32[128, 128])
@helion.kernel(static_shapes=True)
def module_constant_threshold(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(out.size()):
        v = x[t]
        out[t] = torch.where(v > THRESHOLD, v, 0.0)
    return out


def reference(x):
    return torch.where(x > THRESHOLD, x, torch.zeros_like(x))
