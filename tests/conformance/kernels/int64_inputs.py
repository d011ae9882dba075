"""64-bit integer tensors with values beyond 32 bits: TPUs have no 64-bit vector arithmetic, so the kernel
must either be refused or give exact int64 results."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.arange(256, dtype=torch.int64) + 2**40, torch.arange(256, dtype=torch.int64) * 3]


@helion.kernel(static_shapes=True)
def int64_inputs(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(out.size()):
        out[t] = x[t] + y[t]
    return out


def reference(x, y):
    return x + y


REJECT = r"HPL108"
