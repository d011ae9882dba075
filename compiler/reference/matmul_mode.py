"""Helion's mixed-precision matmuls for eager torch: `torch.baddbmm(acc_f32, a_bf16, b_bf16)`, and
`torch.bmm(a_bf16, b_bf16, torch.float32)` (the `out_dtype` overloads of mm/bmm/addmm/baddbmm).

Inside a Helion kernel an f32 accumulator may take low-precision operands (the product is accumulated in
f32 and the result has the accumulator's dtype), and a product may be asked for in f32; eager torch on the
CPU rejects mixed dtypes and has no `out_dtype` kernels, so while a kernel runs this torch-function mode
computes those calls in f32 instead.
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
    """Helion accumulates float products in (at least) f32 — fp8 ones too, which torch will not promote —
    and integer products exactly."""
    dtypes = [t.dtype for t in tensors]
    if any(d.is_floating_point for d in dtypes):
        return torch.float64 if torch.float64 in dtypes else torch.float32
    return torch.int64


_MATMULS: dict[Callable[..., Any], tuple[str, str]] = {  # (Tensor.mm / .bmm take no out_dtype)
    torch.mm: ("input", "mat2"),
    torch.bmm: ("input", "mat2"),
}


def _out_dtype(args: tuple[Any, ...], position: int, kwargs: dict[str, Any]) -> torch.dtype | None:
    """The `out_dtype` of an overload that takes it after the tensors (positionally or by keyword)."""
    given = args[position] if len(args) > position else kwargs.get("out_dtype")
    return given if isinstance(given, torch.dtype) else None


def _matmul(names: tuple[str, str], args: tuple[Any, ...], kwargs: dict[str, Any], out_dtype: torch.dtype) -> torch.Tensor:
    mat1, mat2 = (list(args) + [kwargs[name] for name in names[len(args) :]])[:2]
    compute = accumulate_dtype(mat1, mat2)
    return torch.matmul(mat1.to(compute), mat2.to(compute)).to(out_dtype)


def _add_matmul(names: tuple[str, str, str], args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor:
    values = list(args) + [kwargs[name] for name in names[len(args) :]]
    bias, mat1, mat2 = values[:3]
    out_dtype = _out_dtype(args, 3, kwargs) or bias.dtype
    beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
    compute = accumulate_dtype(bias, mat1, mat2)
    result = torch.matmul(mat1.to(compute), mat2.to(compute))
    if alpha != 1:
        result = result * alpha
    if beta != 0:
        result = result + beta * bias.to(compute)
    return result.to(out_dtype)


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
        if "out" not in kwargs:
            names = _ADD_MATMULS.get(func)
            if names is not None:
                return _add_matmul(names, args, kwargs)
            pair = _MATMULS.get(func)
            out_dtype = _out_dtype(args, 2, kwargs) if pair is not None else None
            if out_dtype is not None:
                return _matmul(pair, args, kwargs, out_dtype)
        return func(*args, **kwargs)
