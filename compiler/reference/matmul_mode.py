"""Helion's mixed-precision `addmm`/`baddbmm` for eager torch: `torch.baddbmm(acc_f32, a_bf16, b_bf16)`.

Inside a Helion kernel an f32 accumulator may take low-precision operands (the product is accumulated in
f32 and the result has the accumulator's dtype); eager torch rejects mixed dtypes, so while a kernel runs
this torch-function mode computes those calls in f32 instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

_ADD_MATMULS: dict[Callable[..., Any], tuple[str, str, str]] = {
    torch.addmm: ("input", "mat1", "mat2"),
    torch.Tensor.addmm: ("input", "mat1", "mat2"),
    torch.baddbmm: ("input", "batch1", "batch2"),
    torch.Tensor.baddbmm: ("input", "batch1", "batch2"),
}


def accumulate_dtype(*tensors: torch.Tensor) -> torch.dtype:
    """Helion accumulates float products in (at least) f32 and integer products exactly."""
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = torch.promote_types(dtype, t.dtype)
    return torch.promote_types(dtype, torch.float32) if dtype.is_floating_point else torch.int64


def _add_matmul(names: tuple[str, str, str], args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor:
    values = list(args) + [kwargs[name] for name in names[len(args) :]]
    bias, mat1, mat2 = values[:3]
    beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
    compute = accumulate_dtype(bias, mat1, mat2)
    result = torch.matmul(mat1.to(compute), mat2.to(compute))
    if alpha != 1:
        result = result * alpha
    if beta != 0:
        result = result + beta * bias.to(compute)
    return result.to(bias.dtype)


class MixedPrecisionMatmul(TorchFunctionMode):
    """Active for the duration of a kernel call; every other torch function runs unchanged."""

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        names = _ADD_MATMULS.get(func)
        if names is not None and "out" not in kwargs:
            return _add_matmul(names, args, kwargs)
        return func(*args, **kwargs)
