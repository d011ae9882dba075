"""Operators, subscripts and iteration in the module-level evaluation (host_eval.py): Python operators on
known values (checked against limits.py first) and on meta tensors, `x[i]` reads and writes, `in`, and the
items of the iterables the evaluation knows. Building a sequence costs evaluation steps by its length.

`OperatorModels` is mixed into `Models` (host_models.py); it needs from it: ev.
"""

from __future__ import annotations

import operator
from typing import Any

import torch

from ..support.diagnostics import Range
from .expressions import _PYBINOPS
from .host_bounds import bounds_of, set_bounds, written
from .host_builtins import Builtin
from .host_torch import has_unknown, inherit, opaque, tensors_in
from .host_values import UNKNOWN, ClassValue, Closure, Instance
from .limits import MAX_SEQUENCE, check_binary, check_count
from .values import Module

_HOST_BINOPS = {**_PYBINOPS, "matmul": operator.matmul}  # `a @ b`: on meta tensors only (ints have no `@`)


class OperatorModels:
    """`a + b`, `x[i]`, `x[i] = v`, `v in x`, `for v in x`."""

    def binop(self, op: str, a: Any, b: Any, rng: Range, fallback: Any) -> Any:
        if has_unknown(a) or has_unknown(b) or opaque(a) or opaque(b):
            return UNKNOWN
        fn = _HOST_BINOPS.get(op)
        if fn is None:
            return UNKNOWN
        if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
            try:
                result = fn(a, b)
            except Exception:  # noqa: BLE001 - shapes or dtypes that do not combine
                return UNKNOWN
            t = a if isinstance(a, torch.Tensor) else b
            other = b if t is a else a
            if bounds_of(t) is not None and isinstance(other, int) and op in ("add", "sub") and t is a:
                lo, hi = bounds_of(t)
                set_bounds(result, lo + other if op == "add" else lo - other, hi + other if op == "add" else hi - other)
            return inherit(result, tensors_in([a, b]))
        check_binary(op, a, b, rng)
        try:
            return self.charge(fn(a, b))
        except Exception:  # noqa: BLE001 - the code would raise here (division by zero, bad types)
            return UNKNOWN

    def charge(self, value: Any) -> Any:
        """Building a sequence costs evaluation steps by its length (one per 16 items), so that no loop
        can fill memory with large lists before the step budget ends it."""
        if isinstance(value, list | tuple | str | dict | set | frozenset):
            self.ev.budget.steps += len(value) // 16
        return value

    def getitem(self, base: Any, index: Any, rng: Range) -> Any:
        if has_unknown(base) or has_unknown(index) or isinstance(base, Module | ClassValue | Builtin):
            return UNKNOWN
        if isinstance(base, dict):
            try:
                return base.get(index, UNKNOWN)
            except TypeError:
                return UNKNOWN
        if isinstance(base, Instance):
            method = base.cls.find("__getitem__")
            return self.ev.call_value(method, [base, index], {}, rng, None) if isinstance(method, Closure) else UNKNOWN
        if isinstance(base, torch.Tensor | tuple | list | str | torch.Size | range):
            if opaque(index) or (isinstance(index, tuple) and any(opaque(i) for i in index)):
                return UNKNOWN
            try:
                result = base[index]
            except Exception:  # noqa: BLE001 - out of range, or an index torch does not take on meta
                return UNKNOWN
            if isinstance(base, torch.Tensor):
                if bounds_of(base) is not None:
                    set_bounds(result, *bounds_of(base))
                return inherit(result, [base])
            return result
        return UNKNOWN

    def setitem(self, base: Any, index: Any, value: Any) -> None:
        if isinstance(base, dict) and index is not UNKNOWN:
            check_count(len(base) + 1, Range.lines(0))
            try:
                base[index] = value
            except TypeError:
                pass
        elif isinstance(base, torch.Tensor):
            written(base, value)
        elif isinstance(base, list) and isinstance(index, int):
            try:
                base[index] = value
            except IndexError:
                pass

    def delitem(self, base: Any, index: Any) -> None:
        if isinstance(base, dict):
            try:
                base.pop(index, None)
            except TypeError:
                pass
        elif isinstance(base, list) and isinstance(index, int) and -len(base) <= index < len(base):
            del base[index]

    def contains(self, container: Any, item: Any, rng: Range) -> Any:
        if has_unknown(item) or not isinstance(container, dict | list | tuple | set | str | range | frozenset):
            return UNKNOWN
        if isinstance(container, list | tuple) and has_unknown(container):
            return UNKNOWN
        try:
            return item in container
        except Exception:  # noqa: BLE001 - unhashable, or a tensor compared elementwise
            return UNKNOWN

    def items_of(self, value: Any) -> list | None:
        """The items of an iterable the evaluation knows (in a deterministic order), else None."""
        if isinstance(value, tuple | list | range | torch.Size | str):
            check_count(len(value), Range.lines(0), "this sequence")
            return self.charge(list(value))
        if isinstance(value, dict):
            return list(value)
        if isinstance(value, set | frozenset):
            return sorted(value, key=repr)
        if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] <= MAX_SEQUENCE:
            return [inherit(value[i], [value]) for i in range(value.shape[0])]
        return None
