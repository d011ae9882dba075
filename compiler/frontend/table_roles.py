"""What each integer tensor argument is to the kernel, read off how its IR uses the values it loads.

A check draws the integer tables a kernel reads as offsets, positions or loop counts as what they are
(compiler/ir/tables.py says what each kind's values are). The kind is decided from the kernel's use, never its
names:

- offsets: a 1-D table loaded at a position p and at p + 1 of the same loop (`starts = offsets[tile]`,
  `ends = offsets[tile.index + 1]`; `offsets[g]`, `offsets[g + 1]` in an `hl.grid`): consecutive entries
  bound one row each, so the table is a jagged layout.
- positions: a table whose values land, scaled by a constant, in an index of another tensor (`w[idx[i] * S +
  r, :]`, `x[offsets[g] + tile.index]`) or in the start of a loop whose tile indexes one (`hl.tile(start,
  end)` then `q[tile_q]`).
- counts: a table whose values end a loop from 0 (`hl.tile(counts[g])`, `hl.jagged_tile(counts[tile])`).

The extent bounds the values: for offsets and positions, the smallest `dim // scale` over the indexes
their values reach (a table value scaled by `scale` indexing a dim of `dim` elements: `(starts + k) * M + m`
into a flat `[L * M]` view gives L); for counts, the smallest dim their loop's tile (or `tile.id`, times its
block) indexes directly. No index reached leaves the extent unknown (None). An offsets table's rows are at
most as long as the smallest dim a loop over a row's length (`hl.tile(0, (ends - starts).amax())`) indexes
directly: jagged + dense adds row i to row i of a dense `[rows, N]` tensor, which no row may outgrow.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import torch

from ..ir.tables import IndexTable
from ..ir.tile_ir import (
    GridLoop,
    HostTensor,
    InnerLoop,
    KernelIR,
    Load,
    Op,
    Store,
    TileDim,
    Value,
    viewed,
    walk,
)
from .index_exprs import affine
from .values import NamedConst

_PASS = frozenset({"to", "index", "broadcast_to", "reshape", "permute", "transpose", "clone", "mask"})
_DEPTH = 64


def table_roles(ir: KernelIR) -> tuple[IndexTable, ...]:
    """An IndexTable for every integer tensor argument the kernel loads and uses as offsets, positions or
    counts, in parameter order."""
    out = []
    for name in ir.params:
        value = ir.args.get(name)
        if not isinstance(value, Value) or value.dtype.is_floating_point or value.dtype.is_complex:
            continue
        loads = [n for n in walk(ir.host) if isinstance(n, Load) and _is(n.tensor, value)]
        if not loads or value.dtype == torch.bool:
            continue
        role = _role(ir, name, value, loads)
        if role is not None:
            out.append(role)
    return tuple(out)



def _is(tensor: HostTensor, arg: Value) -> bool:
    """Is `tensor` the argument whose value is `arg`, or a view of it (`x.reshape(-1)`)?"""
    return viewed(tensor.root.value) is arg


def _role(ir: KernelIR, name: str, arg: Value, loads: list[Load]) -> IndexTable | None:
    scale = _Scale(arg)
    extents = list(_position_extents(ir, arg, scale))
    if _offsets(loads):
        longest = list(_tile_extents(ir, _bounded_loops(ir, scale.length)))
        return IndexTable(name, "offsets", _least(extents), _least(longest))
    if extents:
        return IndexTable(name, "positions", _least(extents))
    loops = _bounded_loops(ir, lambda v: scale.of(v) == 1)
    return IndexTable(name, "counts", _least(list(_tile_extents(ir, loops)))) if loops else None


def _least(extents: list[int]) -> int | None:
    return min(extents) if extents else None


def _offsets(loads: list[Load]) -> bool:
    """Two loads of a 1-D table at p and p + 1 of the same loop positions (`t[0]` and `t[1]` alone are two
    constants, not a layout)."""
    starts = [_start(ld) for ld in loads if len(ld.tensor.value.shape) == 1 and len(ld.index) == 1]
    forms = [s for s in starts if s is not None and s[0]]
    return any(a[0] == b[0] and b[1] == a[1] + 1 for a in forms for b in forms)


def _start(load: Load) -> tuple[frozenset, int] | None:
    """The first position a load of a 1-D table reads, as (affine terms, constant)."""
    item = load.index[0]
    kind = item[0]
    if kind == "tile":
        d: TileDim = item[1]
        return (None if d.dynamic else (frozenset({(d, d.block_size)}), d.begin))
    if kind == "grid":
        return frozenset({(item[1], 1)}), item[1].begin
    if kind == "id":
        return frozenset({(item[1], 1)}), 0
    if kind == "int":
        return frozenset(), item[1]
    if kind in ("scalar", "window"):
        form = affine(item[1])
        return None if form is None else (frozenset(form[0].items()), form[1])
    return None


class _Scale:
    """How a value follows one table's loaded values: `c * value + rest`, as (c, stride) where `rest` is always
    a multiple of `stride` (0: no rest). None: it does not read the table, or not linearly."""

    def __init__(self, table: Value):
        self.table = table
        self._memo: dict[int, tuple[int, int] | None] = {}

    def of(self, v: object) -> int | None:
        """The constant `c` (None: no linear use)."""
        term = self.term(v)
        return None if term is None else term[0]

    def extent(self, v: object, dim: int) -> int | None:
        """How far the table's values may go for `v` to index a dim of `dim` inside it: `dim // c`, and within
        one stride when the rest steps by more than `c` (`row * V + label`: a label stays in its row)."""
        term = self.term(v)
        if term is None or term[0] <= 0:
            return None
        c, stride = term
        return min(dim // c, stride // c) if stride > c else dim // c

    def tile(self, d: TileDim, depth: int = 0) -> tuple[int, int] | None:
        """A tile's positions: those of a loop starting at a table value follow it, plus 0, 1, 2, ..."""
        lo = self.term(d.lo, depth + 1) if isinstance(d.lo, Value) else None
        return None if lo is None else (lo[0], 1)

    def term(self, v: object, depth: int = 0) -> tuple[int, int] | None:
        if not isinstance(v, Value) or depth > _DEPTH:
            return None
        if v.id not in self._memo:
            self._memo[v.id] = self._follow(v, depth)
        return self._memo[v.id]

    def length(self, v: object, depth: int = 0) -> bool:
        """Is the value a difference of two table values (`ends - starts`), or the largest / smallest such?"""
        if not isinstance(v, Value) or not isinstance(v.producer, Op) or depth > _DEPTH:
            return False
        p = v.producer
        if p.kind in _PASS or p.kind in ("amax", "amin", "max", "min"):
            return self.length(p.args[0], depth + 1)
        if p.kind == "sub":
            a, b = (self.term(x, depth + 1) for x in p.args[:2])
            return a is not None and b is not None and a[0] == b[0]
        return False

    def _follow(self, v: Value, depth: int) -> tuple[int, int] | None:
        p = v.producer
        if isinstance(p, Load):
            return (1, 0) if _is(p.tensor, self.table) else None
        if not isinstance(p, Op):
            return None
        if p.kind in _PASS:
            return self.term(p.args[0], depth + 1)
        if p.kind == "iota" and p.args and isinstance(p.args[0], tuple):  # `tile.index`
            return self.tile(p.args[0][1], depth) if isinstance(p.args[0][1], TileDim) else None
        if p.kind in ("tile_begin", "tile_end"):
            return self.tile(p.args[0], depth)
        if p.kind == "neg":
            t = self.term(p.args[0], depth + 1)
            return None if t is None else (-t[0], t[1])
        if p.kind in ("add", "sub"):
            a, b = (self.term(x, depth + 1) for x in p.args[:2])
            if a is None and b is None:
                return None
            sign = 1 if p.kind == "add" else -1
            if a is not None and b is not None:
                c = a[0] + sign * b[0]
                return (c, math.gcd(a[1], b[1])) if c else None  # `ends - starts`: a length, no position
            c, stride = a if a is not None else (sign * b[0], b[1])
            return c, math.gcd(stride, _multiple(p.args[1] if a is not None else p.args[0]))
        if p.kind == "mul":
            a, b = (self.term(x, depth + 1) for x in p.args[:2])
            ka, kb = _const(p.args[0]), _const(p.args[1])
            if a is not None and kb:
                return a[0] * kb, a[1] * abs(kb)
            if b is not None and ka:
                return b[0] * ka, b[1] * abs(ka)
        return None


def _multiple(v: object, depth: int = 0) -> int:
    """A number a value free of the table is always a multiple of (`tile.index * V`: V; 1 when unknown)."""
    k = _const(v)
    if k is not None:
        return abs(k)
    if not isinstance(v, Value) or not isinstance(v.producer, Op) or depth > _DEPTH:
        return 1
    p = v.producer
    if p.kind in _PASS or p.kind == "neg":
        return _multiple(p.args[0], depth + 1)
    if p.kind == "mul":
        return _multiple(p.args[0], depth + 1) * _multiple(p.args[1], depth + 1)
    if p.kind in ("add", "sub"):
        return math.gcd(_multiple(p.args[0], depth + 1), _multiple(p.args[1], depth + 1))
    return 1


def _const(a: object) -> int | None:
    if isinstance(a, NamedConst):
        a = a.value
    return a if isinstance(a, int) and not isinstance(a, bool) else None


def _accesses(ir: KernelIR) -> Iterator[tuple[Load | Store, tuple, int]]:
    """(access, index item, extent of the dim it indexes) for every indexed dim of every load and store."""
    for n in walk(ir.host):
        if not isinstance(n, Load | Store):
            continue
        dim = 0
        for item in n.index:
            if item[0] == "newaxis":
                continue
            yield n, item, n.tensor.value.shape[dim]
            dim += 1


def _position_extents(ir: KernelIR, arg: Value, scale: _Scale) -> Iterator[int]:
    """`dim // scale` for every index of another tensor the table's values reach with a positive scale."""
    for n, item, extent in _accesses(ir):
        if _is(n.tensor, arg):
            continue
        kind = item[0]
        if kind == "tile":
            term = scale.tile(item[1])
            found = extent // term[0] if term is not None and term[0] > 0 else None
        elif kind in ("gather", "scalar", "window"):
            found = scale.extent(item[1], extent)
        else:
            found = None
        if found is not None:
            yield found


def _bounded_loops(ir: KernelIR, bound: Callable[[object], bool]) -> list[TileDim]:
    """Loops from 0 whose end (or per-lane ends, `hl.jagged_tile`) `bound` accepts."""
    out = []
    for n in walk(ir.host):
        if isinstance(n, GridLoop | InnerLoop):
            out += [d for d in n.dims if d.lo in (0, None) and (bound(d.hi) or bound(d.lanes))]
    return out


def _tile_extents(ir: KernelIR, loops: list[TileDim]) -> Iterator[int]:
    """The dims the loops' tiles index directly (`x[tile]`; `t[tile.id]` covers a block per entry): a loop
    that runs past one indexes past it."""
    for _, item, extent in _accesses(ir):
        if item[0] == "tile" and item[1] in loops:
            yield extent
        elif item[0] == "id" and item[1] in loops:
            yield extent * item[1].block_size
