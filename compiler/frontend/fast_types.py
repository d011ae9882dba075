"""Result types of the commonest tile operations, worked out directly instead of by torch's meta kernels.

Why: torch types most operations on meta tensors in Python (its reference implementations, type-promotion
wrappers and `torch._check`, whose first call imports sympy: ~0.2 s of a cold compile), and the tuner
re-traces a kernel for every choice of block sizes, each with new shapes that miss meta_cache.py. For the
plain cases — elementwise arithmetic, comparisons, casts, float unary functions and reductions over
contiguous operands, softmax, where, clamp, and `hl.dot` — the result is simple to state exactly: the
broadcast shape, torch's own `torch.result_type` (a C++ call), contiguous strides.

`result(kind, args, kwargs)` returns that result as a meta tensor, or None for anything outside these
cases (other dtypes, non-contiguous operands, shapes that do not broadcast, errors to report), which then
goes to torch as before. tests/test_compiler_fast_types.py compares it with torch's meta kernels case by
case. May import torch only.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, TypeVar

import torch

_FLOATS = frozenset({torch.float32, torch.bfloat16, torch.float16})
_NUMBERS = _FLOATS | {torch.int32}
_ARITHMETIC = frozenset({"add", "sub", "mul", "div", "maximum", "minimum"})
_COMPARISONS = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})
_FLOAT_UNARY = frozenset({
    "exp", "exp2", "log", "log2", "log1p", "expm1", "sqrt", "rsqrt", "tanh", "sigmoid", "sin", "cos", "tan",
    "atan", "erf", "neg", "abs", "reciprocal", "relu", "square", "floor", "ceil", "trunc", "round", "sign",
})
_REDUCTIONS = frozenset({"sum", "mean", "amax", "amin"})
D = TypeVar("D", bound=Hashable)  # a size: an int, or vmem_floor.py's symbolic tile size


def result(kind: str, args: Sequence[Any], kwargs: dict[str, Any]) -> torch.Tensor | None:
    """The meta tensor torch would give for operation `kind` of ops.py on these meta arguments, or None
    when this module does not cover the case."""
    if kind in _ARITHMETIC or kind in _COMPARISONS:
        return _binary(kind, args) if not kwargs and len(args) == 2 else None
    if kind in _FLOAT_UNARY:
        return _unary(args) if not kwargs and len(args) == 1 else None
    if kind == "to":
        return _cast(args, kwargs)
    if kind in _REDUCTIONS:
        return _reduction(args, kwargs)
    if kind == "dot":
        return _dot(args, kwargs)
    if kind in ("softmax", "log_softmax"):
        return _softmax(args, kwargs)
    if kind == "where":
        return _where(args) if not kwargs and len(args) == 3 else None
    if kind == "clamp":
        return _clamp(args, kwargs)
    return None


def _plain(t: Any, dtypes: frozenset[torch.dtype] = _NUMBERS) -> bool:
    return isinstance(t, torch.Tensor) and t.dtype in dtypes and t.is_contiguous()


def _empty(shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(tuple(shape), dtype=dtype, device="meta")


def broadcast_shapes(*shapes: Sequence[D]) -> tuple[D, ...] | None:
    """torch.broadcast_shapes, or None where torch raises (without its `torch._check`); sizes other than
    1 must be equal, whatever they are."""
    out: list[D] = []
    for i in range(1, max(map(len, shapes), default=0) + 1):
        sizes = {s[-i] for s in shapes if i <= len(s)} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out[::-1])


def _operand_shape(x: Any) -> tuple[int, ...] | None:
    """A plain tensor's shape, () for an int or float scalar (not a bool: its own promotion), else None."""
    if isinstance(x, torch.Tensor):
        return tuple(x.shape) if _plain(x) else None
    return () if type(x) in (int, float) else None


def _binary(kind: str, args: Sequence[Any]) -> torch.Tensor | None:
    a, b = args
    if not _plain(a):  # a scalar first operand goes to torch, which decides how to take it
        return None
    if kind in ("maximum", "minimum") and not isinstance(b, torch.Tensor):
        return None
    b_shape = _operand_shape(b)
    shape = None if b_shape is None else broadcast_shapes(a.shape, b_shape)
    if shape is None:
        return None
    dtype = torch.result_type(a, b)
    if kind == "div" and not dtype.is_floating_point:  # true division of integers: torch's default float
        return None
    return _empty(shape, torch.bool if kind in _COMPARISONS else dtype)


def _where(args: Sequence[Any]) -> torch.Tensor | None:
    """torch.where(cond, x, y) with a bool tensor condition and at least one tensor branch."""
    cond, x, y = args
    branches = [_operand_shape(x), _operand_shape(y)]
    if not _plain(cond, frozenset({torch.bool})) or None in branches:
        return None
    if not any(isinstance(b, torch.Tensor) for b in (x, y)):
        return None  # two scalars: ops.py makes them tensors first
    shape = broadcast_shapes(cond.shape, *branches)
    return None if shape is None else _empty(shape, torch.result_type(x, y))


def _clamp(args: Sequence[Any], kwargs: dict[str, Any]) -> torch.Tensor | None:
    """torch.clamp of a float tensor between scalar bounds (either may be None, not both)."""
    if len(args) != 1 or set(kwargs) != {"min", "max"} or not _plain(args[0], _FLOATS):
        return None
    bounds = [kwargs["min"], kwargs["max"]]
    if all(b is None for b in bounds) or not all(b is None or type(b) in (int, float) for b in bounds):
        return None
    return _empty(args[0].shape, args[0].dtype)


def _unary(args: Sequence[Any]) -> torch.Tensor | None:
    (x,) = args
    return _empty(x.shape, x.dtype) if _plain(x, _FLOATS) else None


def _cast(args: Sequence[Any], kwargs: dict[str, Any]) -> torch.Tensor | None:
    dtype = kwargs.get("dtype")
    if len(args) != 1 or set(kwargs) != {"dtype"} or dtype not in _NUMBERS or not _plain(args[0]):
        return None
    return _empty(args[0].shape, dtype)


def _reduction(args: Sequence[Any], kwargs: dict[str, Any]) -> torch.Tensor | None:
    if len(args) != 1 or set(kwargs) != {"dim", "keepdim"} or not _plain(args[0], _FLOATS):
        return None
    x, dim, keepdim = args[0], kwargs["dim"], kwargs["keepdim"]
    if dim is None:
        return _empty([], x.dtype)  # torch reduces everything, keepdim or not, without a dim
    dims = dim if isinstance(dim, tuple) else (dim,)
    if (not dims or type(keepdim) is not bool or not all(type(d) is int and 0 <= d < x.dim() for d in dims)
            or len(set(dims)) != len(dims)):
        return None
    shape = [1 if i in dims else n for i, n in enumerate(x.shape) if keepdim or i not in dims]
    return _empty(shape, x.dtype)


def _softmax(args: Sequence[Any], kwargs: dict[str, Any]) -> torch.Tensor | None:
    if len(args) != 1 or set(kwargs) != {"dim", "dtype"} or not _plain(args[0], _FLOATS):
        return None
    x, dim, dtype = args[0], kwargs["dim"], kwargs["dtype"]
    if type(dim) is not int or not 0 <= dim < max(x.dim(), 1) or dtype not in (None, *_FLOATS):
        return None
    return _empty(x.shape, dtype or x.dtype)


def _dot(args: Sequence[Any], kwargs: dict[str, Any]) -> torch.Tensor | None:
    """ops.dot's meta: f32 matmul of the operands (either may be a transposed view), cast to out_dtype,
    plus an accumulator of exactly the product's shape."""
    out_dtype = kwargs.get("out_dtype")
    if set(kwargs) != {"out_dtype"} or out_dtype not in _NUMBERS or len(args) not in (2, 3):
        return None
    a, b = args[0], args[1]
    if not all(isinstance(t, torch.Tensor) and t.dtype in _NUMBERS for t in (a, b)):
        return None
    if a.dim() != b.dim() or a.dim() not in (2, 3) or a.shape[-1] != b.shape[-2] or a.shape[:-2] != b.shape[:-2]:
        return None
    shape = [*a.shape[:-1], b.shape[-1]]
    if len(args) == 3:
        acc = args[2]
        if not _plain(acc) or list(acc.shape) != shape:  # (the sum is cast back to out_dtype either way)
            return None
    return _empty(shape, out_dtype)
