"""Positions in device code: arithmetic on them (ints stay Python ints, anything else becomes an op), runs
of the form `start + step * arange(n)` recognised in 1-D int values, and the `window` item a run or a
static slice makes (indexing.py, value_indexing.py and composed_reads.py build on these).
"""

from __future__ import annotations

from typing import Any

import torch

from ..ir.tile_ir import Op, TileDim, Value
from ..support.diagnostics import Range, UserError
from .values import NamedConst

Run = tuple  # (start: int | Value, size: int, step: int): the positions start + step * arange(size)


def const(v: Any) -> Any:
    return v.value if isinstance(v, NamedConst) else v


def is_int(v: Any) -> bool:
    v = const(v)
    return isinstance(v, int) and not isinstance(v, bool)


def int_value(v: Any) -> bool:
    return isinstance(v, Value) and v.space == "device" and not v.dtype.is_floating_point and v.dtype != torch.bool


def slice_text(s: slice) -> str:
    parts = ["" if p is None else str(const(p)) for p in (s.start, s.stop)]
    text = ":".join(parts)
    return text + (f":{const(s.step)}" if s.step is not None else "")


def offset(v: Any) -> tuple[Any, int]:
    """(base, c) with v = base + c, following + and - of ints (base None for an int)."""
    if v is None or is_int(v):
        return None, const(v) if v is not None else 0
    p = v.producer if isinstance(v, Value) else None
    if isinstance(p, Op) and p.kind in ("add", "sub") and len(p.args) == 2:
        a, b = p.args
        if is_int(b):
            base, c = offset(a)
            return base, c + (const(b) if p.kind == "add" else -const(b))
        if is_int(a) and p.kind == "add":
            base, c = offset(b)
            return base, c + const(a)
    return v, 0


class Positions:
    """Mixed into `Indexer` (indexing.py); needs from it: ops."""

    # -- arithmetic on positions (ints stay Python ints) -------------------------------------------------

    def add(self, a: Any, b: Any, rng: Range) -> Any:
        if is_int(a) and is_int(b):
            return const(a) + const(b)
        if is_int(b) and const(b) == 0:
            return a
        if is_int(a) and const(a) == 0:
            return b
        return self.ops.binary("add", a, b, rng)

    def mul(self, a: Any, k: int, rng: Range) -> Any:
        if is_int(a):
            return const(a) * k
        return a if k == 1 else self.ops.binary("mul", a, k, rng)

    def begin(self, d: TileDim, rng: Range) -> Value:
        return self.ops.scalar("tile_begin", (d,), rng)

    # -- 1-D positions ------------------------------------------------------------------------------------

    def run(self, v: Value, rng: Range, depth: int = 0) -> Run | None:
        """(start, size, step) when the 1-D int value is start + step * arange(size); else None."""
        p = v.producer
        if not isinstance(p, Op) or len(v.shape) != 1 or depth > 32:
            return None
        if p.kind == "iota":
            if p.args and p.args[0][1].dynamic:
                return None  # a device-bounded tile's positions are a clamped window: never a plain run
            n = p.kwargs["n"]
            return (self.begin(p.args[0][1], rng) if p.args else 0), n, 1
        if p.kind == "to" and int_value(p.out):
            return self.run(p.args[0], rng, depth + 1) if isinstance(p.args[0], Value) else None
        if p.kind not in ("add", "sub", "mul") or len(p.args) != 2:
            return None
        a, b = p.args

        def vec(x: Any) -> Run | None:
            return self.run(x, rng, depth + 1) if isinstance(x, Value) and len(x.shape) == 1 else None

        def scalar(x: Any) -> bool:
            return is_int(x) or (int_value(x) and not x.shape)

        ra, rb = vec(a), vec(b)
        if p.kind == "add" and ra and scalar(b):
            return self.add(ra[0], b, rng), ra[1], ra[2]
        if p.kind == "add" and rb and scalar(a):
            return self.add(a, rb[0], rng), rb[1], rb[2]
        if p.kind == "sub" and ra and scalar(b):
            neg = -const(b) if is_int(b) else self.ops.unary("neg", b, rng)
            return self.add(ra[0], neg, rng), ra[1], ra[2]
        if p.kind == "mul" and ra and is_int(b) and const(b) > 0:
            return self.mul(ra[0], const(b), rng), ra[1], ra[2] * const(b)
        if p.kind == "mul" and rb and is_int(a) and const(a) > 0:
            return self.mul(rb[0], const(a), rng), rb[1], rb[2] * const(a)
        return None

    @staticmethod
    def exact_tile(v: Value) -> TileDim | None:
        """`tile.index` itself (all of the tile's positions, in order)."""
        p = v.producer
        if isinstance(p, Op) and p.kind == "iota" and p.args and p.kwargs["n"] == p.args[0][1].block_size:
            return p.args[0][1]
        return None

    @staticmethod
    def _slice_item(size: int, s: slice, rng: Range) -> tuple:
        parts = [const(p) for p in (s.start, s.stop, s.step)]
        if any(p is not None and not is_int(p) for p in parts):
            raise UserError("HPL106", "slice bounds in device code must be integers known at compile time (use "
                                      "`hl.arange` plus an offset for a window that moves)", rng)
        if parts[2] is not None and parts[2] <= 0:
            raise UserError("HPL105", "slice step must be positive", rng)
        r = range(size)[slice(*parts)]
        if len(r) == 0:
            raise UserError("HPL105", f"the slice {slice_text(s)} of a dim of size {size} is empty", rng)
        if r.start == 0 and r.step == 1 and len(r) == size:
            return ("full",)
        return ("window", r.start, len(r), r.step)

    @staticmethod
    def window(size: int, run: Run, rng: Range) -> tuple:
        start, n, step = run
        if is_int(start):
            start = const(start)
            last = start + (n - 1) * step
            if start < 0 or last >= size:
                raise UserError("HPL105", f"positions {start}..{last} are out of range for size {size}", rng)
            if start == 0 and step == 1 and n == size:
                return ("full",)
        elif n > size:
            raise UserError("HPL105", f"a window of {n} positions does not fit a dim of size {size}", rng)
        return ("window", start, n, step)
