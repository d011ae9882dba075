"""Scalars read from a small tensor (`coeffs[i]`) and reassigned in both arms of an `if` on an argument."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.linspace(-1.0, 1.0, 256), 1.0, torch.arange(1, 7, dtype=torch.float32)]


@helion.kernel(static_shapes=True)
def branch_scalar_coeffs(x: torch.Tensor, flag: float, coeffs: torch.Tensor) -> torch.Tensor:
    (n,) = x.shape
    bn = hl.register_block_size(n)
    out = torch.empty([n], device=x.device, dtype=torch.float32)
    for tn in hl.tile(n, block_size=bn):
        first = coeffs[0]
        second = coeffs[1]
        if flag == 1.0:
            first = coeffs[2]
            third = coeffs[3]
        else:
            second = coeffs[4]
            third = coeffs[5]
        out[tn] = x[tn] * first * second * third
    return out


def reference(x, flag, coeffs):
    if flag == 1.0:
        return x * coeffs[2] * coeffs[1] * coeffs[3]
    return x * coeffs[0] * coeffs[4] * coeffs[5]
