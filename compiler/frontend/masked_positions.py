"""Positions an `hl.load(..., extra_mask=m)` may read past a tensor's end because `m` masks them off.

`concat2d_dim1` loads `x[tile0, tile1]` and `y[tile0, tile1.index - x.size(1)]` over the columns of the output,
each under a mask that keeps only its own part: the tile spans more than `x` has, and the shifted positions run
below 0 and past `y`. Such a load is legal when the mask provably keeps every read position inside the tensor;
it is then read as a gather (out-of-range positions read 0 and are masked to 0 anyway). The proof covers what
kernels write: positions `tile.index + c`, masks that are conjunctions of `tile.index (+ c) <op> k` (broadcast
with `[None, :]`). Anything else keeps its out-of-range diagnostic.
"""

from __future__ import annotations

from typing import Any

from ..ir.tile_ir import Op, TileDim, Value
from .values import NamedConst

_MAX_DEPTH = 16


def _int(v: Any) -> int | None:
    v = v.value if isinstance(v, NamedConst) else v
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def tile_offset(v: Any, depth: int = 0) -> tuple[TileDim, int] | None:
    """(d, c) when the 1-D value is `d.index + c` (through +/- of ints and int casts)."""
    p = v.producer if isinstance(v, Value) else None
    if not isinstance(p, Op) or depth > _MAX_DEPTH:
        return None
    if p.kind == "iota" and p.args and p.args[0][0] == "tile" and p.kwargs.get("n") == p.args[0][1].block_size:
        return p.args[0][1], 0
    if p.kind == "to" and not v.dtype.is_floating_point:
        return tile_offset(p.args[0], depth + 1)
    if p.kind in ("add", "sub") and len(p.args) == 2:
        a, b = p.args
        if _int(b) is not None:
            found = tile_offset(a, depth + 1)
            return None if found is None else (found[0], found[1] + (_int(b) if p.kind == "add" else -_int(b)))
        if _int(a) is not None and p.kind == "add":
            found = tile_offset(b, depth + 1)
            return None if found is None else (found[0], found[1] + _int(a))
    return None


def index_interval(mask: Any, d: TileDim, depth: int = 0) -> tuple[float, float]:
    """[lo, hi): where `mask` holds, `d.index` lies in it (-inf, inf when the mask says nothing about d)."""
    lo, hi = float("-inf"), float("inf")
    p = mask.producer if isinstance(mask, Value) else None
    if not isinstance(p, Op) or depth > _MAX_DEPTH:
        return lo, hi
    if p.kind in ("index", "broadcast_to", "reshape") and isinstance(p.args[0], Value):
        return index_interval(p.args[0], d, depth + 1)
    if p.kind in ("and", "logical_and") and len(p.args) == 2:
        a_lo, a_hi = index_interval(p.args[0], d, depth + 1)
        b_lo, b_hi = index_interval(p.args[1], d, depth + 1)
        return max(a_lo, b_lo), min(a_hi, b_hi)
    if p.kind in ("lt", "le", "gt", "ge") and len(p.args) == 2:
        a, b = p.args
        kind = p.kind
        if _int(a) is not None:  # k < x  ->  x > k
            a, b = b, a
            kind = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}[kind]
        found, k = tile_offset(a), _int(b)
        if found is None or found[0] is not d or k is None:
            return lo, hi
        k -= found[1]  # d.index + c <op> k  <=>  d.index <op> k - c
        return {"lt": (lo, k), "le": (lo, k + 1), "gt": (k + 1, hi), "ge": (k, hi)}[kind]
    return lo, hi


def masked_in_range(positions: Any, size: int, mask: Any) -> bool:
    """Whether every position of `positions` (d.index + c) that `mask` keeps lies in [0, size)."""
    found = tile_offset(positions)
    if found is None or mask is None:
        return False
    d, c = found
    lo, hi = index_interval(mask, d)
    lo, hi = max(lo, d.begin), min(hi, d.extent)
    return lo >= hi or (lo + c >= 0 and hi - 1 + c < size)
