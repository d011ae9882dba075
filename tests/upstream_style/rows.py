"""Row kernels written the way upstream Helion's examples are: no shape lines; `main()` calls `check()` for a
few sizes, which builds inputs with helion._testing's DEVICE / HALF_DTYPE and runs a dict of kernels and an
autograd.Function through `run_example`. Nothing here is run by the tests: they read it statically.
"""
# ruff: noqa: I001 - imports as upstream's examples write them

from __future__ import annotations

from typing import Any

import torch

import helion
from helion._testing import DEVICE
from helion._testing import HALF_DTYPE
from helion._testing import run_example
import helion.language as hl


@helion.kernel()
def row_softmax(x: torch.Tensor) -> torch.Tensor:
    n, _m = x.size()
    out = torch.empty_like(x)
    for tile_n in hl.tile(n):
        out[tile_n, :] = torch.nn.functional.softmax(x[tile_n, :], dim=1)
    return out


@helion.kernel()
def row_scale(x: torch.Tensor, scale: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = x[tile] * scale
    return out


@helion.kernel()
def rms_fwd(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.size()
    out = torch.empty_like(x)
    inv_rms = torch.empty([m], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(m):
        xf = x[tile_m, :].to(torch.float32)
        inv = torch.rsqrt(torch.mean(xf * xf, dim=-1) + eps)
        out[tile_m, :] = (xf * inv[:, None] * weight[:].to(torch.float32)).to(out.dtype)
        inv_rms[tile_m] = inv
    return out, inv_rms.reshape(-1, 1)


@helion.kernel()
def rms_bwd(grad_out: torch.Tensor, x: torch.Tensor, inv_rms: torch.Tensor) -> torch.Tensor:
    grad_x = torch.empty_like(x)
    for tile_m in hl.tile(x.size(0)):
        g = grad_out[tile_m, :].to(torch.float32)
        grad_x[tile_m, :] = (g * inv_rms[tile_m, :]).to(x.dtype)
    return grad_x


@helion.kernel()
def never_called(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tile in hl.tile([m, n]):
        out[tile] = x[tile] + 1
    return out


class RmsNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
        y, inv_rms = rms_fwd(x, weight, eps)
        ctx.save_for_backward(x, inv_rms)
        return y

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, None, None]:
        x, inv_rms = ctx.saved_tensors
        return rms_bwd(grad_out, x, inv_rms), None, None


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    return RmsNormFunction.apply(x, weight, eps)


def check(m: int, n: int) -> None:
    x = torch.randn([m, n], device=DEVICE, dtype=HALF_DTYPE)
    kernels = {
        "softmax": row_softmax,
        "scaled by half": lambda t: row_scale(t, 0.5),
    }
    run_example(kernels, lambda t: torch.softmax(t, dim=1), (x,))

    x_grad = torch.randn([m, n], device=DEVICE, dtype=HALF_DTYPE, requires_grad=True)
    weight = torch.randn([n], device=DEVICE, dtype=HALF_DTYPE, requires_grad=True)
    run_example(rms_norm, torch.nn.functional.rms_norm, (x_grad, weight, 1e-6), bwd=True)


def main() -> None:
    for m, n in [(64, 256), (128, 512)]:
        check(m, n)


if __name__ == "__main__":
    main()
