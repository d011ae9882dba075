"""Device scalars used as indices: what they depend on, their bounds and alignment, and their text in an
index map.

A computed index (`tile.begin + 5`, `bh // heads`, `starts[g] * 128`) is an ordinary 0-d int `Value` of the
IR, produced by a chain of `Op`s. Placement decisions need three facts about it, read off that chain:
- which loops' positions it depends on, and whether it depends on loaded data (`deps`): an index made only
  of launch-grid positions and constants can choose a block in a BlockSpec index map; anything else is
  applied inside the kernel to a block that spans the whole dim;
- its range (`bounds`, interval arithmetic over the loops' positions): an index proven to stay inside the
  array needs no clamp;
- a power-of-two-free alignment (`multiple`, a gcd): a window start proven to be a multiple of its size
  selects whole blocks, and TPU dynamic lane offsets must be provable multiples of 128.
`render` prints the chain as one Python expression for an index map (grid positions named by the caller).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ..ir.tile_ir import Load, Op, TileDim, Value
from .values import NamedConst

_ARITH = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "mod": "%"}
_MAX_DEPTH = 64  # index chains are short; a deeper one is treated as opaque


@dataclass(frozen=True)
class Deps:
    """What a scalar index depends on: loop ids whose positions it reads, and loaded data."""

    loops: frozenset[int] = frozenset()
    data: bool = False
    opaque: bool = False  # an op this module cannot follow (then nothing is proven about it)
    dims: frozenset[tuple[int, int]] = frozenset()  # (loop id, axis) of each loop dim it reads

    def __or__(self, other: Deps) -> Deps:
        return Deps(self.loops | other.loops, self.data or other.data, self.opaque or other.opaque,
                    self.dims | other.dims)


def _int(a: object) -> int | None:
    if isinstance(a, NamedConst):
        a = a.value
    if isinstance(a, bool) or not isinstance(a, int):
        return None
    return a


def deps(v: object, depth: int = 0) -> Deps:
    if _int(v) is not None:
        return Deps()
    if not isinstance(v, Value) or depth > _MAX_DEPTH:
        return Deps(opaque=True)
    p = v.producer
    if isinstance(p, Load):
        return Deps(data=True)
    if not isinstance(p, Op):
        return Deps(opaque=True)
    if p.kind in ("tile_begin", "tile_end", "tile_id"):
        d: TileDim = p.args[0]
        out = Deps(frozenset({d.loop_id}), data=d.dynamic, dims=frozenset({(d.loop_id, d.axis)}))
        if d.parent is not None:
            out = out | Deps(frozenset({d.parent.loop_id}), dims=frozenset({(d.parent.loop_id, d.parent.axis)}))
        return out
    if p.kind in _ARITH or p.kind in ("maximum", "minimum", "to", "neg", "clamp"):
        out = Deps()
        for a in p.args:
            out = out | deps(a, depth + 1)
        return out
    return Deps(opaque=True)


def bounds(v: object, depth: int = 0) -> tuple[int, int] | None:
    """Smallest and largest value the scalar can take, or None when unknown."""
    c = _int(v)
    if c is not None:
        return c, c
    if not isinstance(v, Value) or depth > _MAX_DEPTH:
        return None
    p = v.producer
    if not isinstance(p, Op):
        return None
    if p.kind in ("tile_begin", "tile_end", "tile_id"):
        d: TileDim = p.args[0]
        if d.dynamic:  # inside the loop a step's first position lies in [begin, end), its end in (begin, end]
            lo_b, hi_b = bounds(d.lo, depth + 1), bounds(d.hi, depth + 1)
            if lo_b is None or hi_b is None or p.kind == "tile_id":
                return None
            return (lo_b[0], hi_b[1] - 1) if p.kind == "tile_begin" else (lo_b[0] + 1, hi_b[1])
        last = d.steps - 1
        if p.kind == "tile_id":
            return 0, last
        lo, hi = d.begin, d.begin + last * d.block_size
        if d.parent is not None:
            pb = bounds_of_begin(d.parent)
            lo, hi = lo + pb[0], hi + pb[1]
        if p.kind == "tile_end":
            lo, hi = lo + d.block_size, hi + d.block_size
            limit = d.extent + (bounds_of_begin(d.parent)[1] if d.parent is not None else 0)
            lo, hi = min(lo, limit), min(hi, limit)
        return lo, hi
    if p.kind == "to":
        return bounds(p.args[0], depth + 1)
    if p.kind == "neg":
        b = bounds(p.args[0], depth + 1)
        return None if b is None else (-b[1], -b[0])
    if p.kind == "clamp":
        b = bounds(p.args[0], depth + 1)
        lo, hi = _int(p.kwargs.get("min")), _int(p.kwargs.get("max"))
        if b is None:
            return (lo, hi) if lo is not None and hi is not None else None
        return (max(b[0], lo) if lo is not None else b[0], min(b[1], hi) if hi is not None else b[1])
    if p.kind not in _ARITH and p.kind not in ("maximum", "minimum"):
        return None
    span = _tile_span(p)
    if span is not None:
        return span
    a, b = (bounds(x, depth + 1) for x in p.args[:2])
    if p.kind == "mod":
        m = _int(p.args[1])
        if m is not None and m > 0:
            return (a[0], a[1]) if a is not None and 0 <= a[0] and a[1] < m else (0, m - 1)
        return None
    if a is None or b is None:
        return None
    if p.kind == "add":
        return a[0] + b[0], a[1] + b[1]
    if p.kind == "sub":
        return a[0] - b[1], a[1] - b[0]
    if p.kind == "maximum":
        return max(a[0], b[0]), max(a[1], b[1])
    if p.kind == "minimum":
        return min(a[0], b[0]), min(a[1], b[1])
    if p.kind == "mul":
        products = [x * y for x in a for y in b]
        return min(products), max(products)
    if p.kind == "floordiv" and b[0] == b[1] and b[0] > 0:
        return a[0] // b[0], a[1] // b[0]
    return None


def _tile_span(p: Op) -> tuple[int, int] | None:
    """`t.end - t.begin` of one compile-time tile: the positions in its block, 0..block_size (sharper than the
    difference of the two bounds)."""
    if p.kind != "sub" or not all(isinstance(a, Value) and isinstance(a.producer, Op) for a in p.args):
        return None
    end, begin = p.args[0].producer, p.args[1].producer
    if end.kind == "tile_end" and begin.kind == "tile_begin" and end.args[0] == begin.args[0] \
            and not end.args[0].dynamic:
        return 0, end.args[0].block_size
    return None


def bounds_of_begin(d: TileDim) -> tuple[int, int]:
    lo = d.begin
    hi = d.begin + (d.steps - 1) * d.block_size
    if d.parent is not None:
        p = bounds_of_begin(d.parent)
        lo, hi = lo + p[0], hi + p[1]
    return lo, hi


def multiple(v: object, depth: int = 0) -> int:
    """A number the scalar is always a multiple of (0 means it is always 0; 1 means nothing is known)."""
    c = _int(v)
    if c is not None:
        return abs(c)
    if not isinstance(v, Value) or depth > _MAX_DEPTH:
        return 1
    p = v.producer
    if not isinstance(p, Op):
        return 1
    if p.kind == "tile_begin":
        d: TileDim = p.args[0]
        if d.dynamic:
            return 1
        m = math.gcd(d.block_size, d.begin)
        if d.parent is not None:
            m = math.gcd(m, multiple_of_begin(d.parent))
        return m
    if p.kind in ("to", "neg"):
        return multiple(p.args[0], depth + 1)
    if p.kind in ("add", "sub"):
        return math.gcd(multiple(p.args[0], depth + 1), multiple(p.args[1], depth + 1))
    if p.kind == "mul":
        return multiple(p.args[0], depth + 1) * multiple(p.args[1], depth + 1)
    return 1


def multiple_of_begin(d: TileDim) -> int:
    m = math.gcd(d.block_size, d.begin)
    return m if d.parent is None else math.gcd(m, multiple_of_begin(d.parent))


def render(v: object, position: Callable[[TileDim, str], str | None], depth: int = 0) -> str | None:
    """The scalar as one expression; `position(dim, "begin" | "end" | "id")` names a loop position (None
    when that loop cannot be named where the text goes). None when the chain has data or opaque ops."""
    c = _int(v)
    if c is not None:
        return str(c)
    if not isinstance(v, Value) or depth > _MAX_DEPTH or not isinstance(v.producer, Op):
        return None
    p = v.producer
    if p.kind in ("tile_begin", "tile_end", "tile_id"):
        if p.args[0].dynamic:
            return None
        return position(p.args[0], p.kind[5:])
    if p.kind == "to":
        return render(p.args[0], position, depth + 1)
    args = [render(a, position, depth + 1) for a in p.args]
    if any(a is None for a in args):
        return None
    if p.kind == "neg":
        return f"-({args[0]})"
    if p.kind in ("maximum", "minimum"):
        return f"jnp.{p.kind}({args[0]}, {args[1]})"
    if p.kind in _ARITH:
        return f"({args[0]} {_ARITH[p.kind]} {args[1]})"
    return None


def strip_parens(text: str) -> str:
    """`(a + b)` -> `a + b` when the outer parentheses enclose the whole text."""
    if not (text.startswith("(") and text.endswith(")")):
        return text
    level = 0
    for i, ch in enumerate(text):
        level += ch == "("
        level -= ch == ")"
        if level == 0 and i < len(text) - 1:
            return text
    return text[1:-1]


def affine(v: object, depth: int = 0) -> tuple[dict[TileDim, int], int] | None:
    """v = const + sum(coeff * block number of dim) when it is made of tile begins / ids, ints, +, -, and
    multiplication by ints (a tile begin is `block number * block_size + begin`); else None."""
    c = _int(v)
    if c is not None:
        return {}, c
    if not isinstance(v, Value) or depth > _MAX_DEPTH or not isinstance(v.producer, Op):
        return None
    p = v.producer
    if p.kind in ("tile_begin", "tile_id"):
        d: TileDim = p.args[0]
        if d.parent is not None or d.dynamic:
            return None
        if p.kind == "tile_id":
            return {d: 1}, 0
        return ({d: d.block_size}, d.begin) if d.api == "tile" else ({d: 1}, d.begin)
    if p.kind == "to":
        return affine(p.args[0], depth + 1)
    if p.kind not in ("add", "sub", "mul", "neg"):
        return None
    parts = [affine(a, depth + 1) for a in p.args]
    if any(x is None for x in parts):
        return None
    if p.kind == "neg":
        terms, const = parts[0]
        return {d: -k for d, k in terms.items()}, -const
    (ta, ca), (tb, cb) = parts[0], parts[1]
    if p.kind == "mul":
        if ta and tb:
            return None
        terms, k = (ta, cb) if ta else (tb, ca)
        return {d: c * k for d, c in terms.items()}, ca * cb
    sign = 1 if p.kind == "add" else -1
    terms = dict(ta)
    for d, k in tb.items():
        terms[d] = terms.get(d, 0) + sign * k
    return {d: k for d, k in terms.items() if k}, ca + sign * cb


def device_tile_positions(v: object, scalars: bool = False) -> TileDim | None:
    """A device-bounded tile whose `tile.index` positions (with `scalars`, also its begin / end) `v` is
    computed from (None if none). Such positions index a tensor correctly only as the tile itself (`x[t, :]`):
    the tile's window is clamped inside the arrays and masked per step, which a window or gather built from
    `t.index` would not be; and nothing bounds them to a loaded block's rows."""
    seen: set[int] = set()
    todo = [v]
    while todo:
        x = todo.pop()
        if not isinstance(x, Value) or x.id in seen or len(seen) > 4 * _MAX_DEPTH:
            continue
        seen.add(x.id)
        p = x.producer
        if not isinstance(p, Op):
            continue
        if p.kind == "iota" and p.args and p.args[0][1].dynamic:
            return p.args[0][1]
        if scalars and p.kind in ("tile_begin", "tile_end") and p.args[0].dynamic:
            return p.args[0]
        todo.extend(a for a in p.args if isinstance(a, Value))
    return None

