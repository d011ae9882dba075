"""Helion's mixed-precision matmuls for eager torch: `torch.baddbmm(acc_f32, a_bf16, b_bf16)`, and
`torch.bmm(a_bf16, b_bf16, torch.float32)` (the `out_dtype` overloads of mm/bmm/addmm/baddbmm).

Inside a Helion kernel an f32 accumulator may take low-precision operands (the product is accumulated in
f32 and the result has the accumulator's dtype), and a product may be asked for in f32; eager torch on the
CPU rejects mixed dtypes and has no `out_dtype` kernels, so while a kernel runs this torch-function mode
computes those calls in f32 instead.

With `exact=True` every floating-point product (matmul, mm, bmm, dot, einsum, addmm, baddbmm, `@`, and so
hl.dot) is computed in f64 and rounded to the dtype the call returns: a second evaluation of the same program
whose sums are exact, so how far it lands from the first measures what summation order alone may change
(`check` allows a kernel that much more, see compiler/check.py).
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


def _add_matmul(names: tuple[str, str, str], args: tuple[Any, ...], kwargs: dict[str, Any],
                exact: bool = False) -> torch.Tensor:
    values = list(args) + [kwargs[name] for name in names[len(args) :]]
    bias, mat1, mat2 = values[:3]
    out_dtype = _out_dtype(args, 3, kwargs) or bias.dtype
    beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
    compute = torch.float64 if exact and mat1.dtype.is_floating_point else accumulate_dtype(bias, mat1, mat2)
    result = torch.matmul(mat1.to(compute), mat2.to(compute))
    if alpha != 1:
        result = result * alpha
    if beta != 0:
        result = result + beta * bias.to(compute)
    return result.to(out_dtype)


_EXACT_PRODUCTS = frozenset({
    torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.mm, torch.Tensor.mm, torch.bmm,
    torch.Tensor.bmm, torch.dot, torch.Tensor.dot, torch.einsum,
})


def _exact(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """`func` on f64 copies of its floating-point tensors, rounded to the dtype it returns on the originals."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if not tensors or not all(t.dtype.is_floating_point for t in tensors):
        return func(*args, **kwargs)
    out_dtype = _out_dtype(args, 2, kwargs) if func in (torch.mm, torch.bmm) else None
    if out_dtype is None:
        out_dtype = tensors[0].dtype
        for t in tensors[1:]:
            out_dtype = torch.promote_types(out_dtype, t.dtype)
    wide = tuple(a.double() if isinstance(a, torch.Tensor) else a for a in args)
    if func in (torch.mm, torch.bmm) and len(wide) > 2:
        wide = wide[:2]
    return func(*wide, **{k: v for k, v in kwargs.items() if k != "out_dtype"}).to(out_dtype)


class MixedPrecisionMatmul(TorchFunctionMode):
    """Active for the duration of a kernel call; every other torch function runs unchanged (with `exact`,
    every float product is summed in f64)."""

    def __init__(self, exact: bool = False):
        super().__init__()
        self.exact = exact

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
                return _add_matmul(names, args, kwargs, self.exact)
            if self.exact and func in _EXACT_PRODUCTS:
                return _exact(func, args, kwargs)
            pair = _MATMULS.get(func)
            out_dtype = _out_dtype(args, 2, kwargs) if pair is not None else None
            if out_dtype is not None:
                return _matmul(pair, args, kwargs, out_dtype)
        return func(*args, **kwargs)
