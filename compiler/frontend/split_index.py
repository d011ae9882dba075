"""Accesses indexed by position tensors that are a reshaped view in disguise.

Kernels ported from GPU code address blocks with computed positions (vLLM's per-group quantization):

    m_blk = (tile_m.begin + hl.arange(tile_m.block_size))[:, None, None]
    n_blk = (tile_g.index[:, None] * group + tile_n.index[None, :])[None, :, :]
    x = hl.load(input, [m_blk, n_blk])          # input: [T, H]; x: [bm, bg, group]

Read literally that is a two-dimensional gather. But each index is affine in tile positions, one term per axis
of the broadcast index shape, and a dim indexed by `g * group + n` with `n` in `[0, group)` is that dim split in
two: the access is `input.view(T, H // group, group)[tile_m rows, tile_g, tile_n]`, a block of a view. This
module recognises that form (`split_access`) and gives the view's shape and the index items of the block, so
the access compiles to a BlockSpec (or an in-VMEM window) like any tile — no gather, no one-hot matmul — and
partial tiles are masked as usual.

The form, per tensor dim: positions `offset + sum_j c_j * p_j`, each `p_j` the positions of one tile or
`hl.arange` (`start + step * arange(n)`) varying along its own axis of the broadcast index shape, with the
coefficients dividing each other down to 1 and every inner term statically inside its factor (`0 <= p_j <
c_{j-1} / c_j`); the axes must appear in the order of the tensor's dims (else the block would need a transpose).
Anything else is left to the gather path (one tensor index) or refused as before (several).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ..ir.tile_ir import Op, TileDim, Value
from ..support.diagnostics import Range
from . import index_exprs as ix
from .fast_types import broadcast_shapes
from .values import NamedConst

if TYPE_CHECKING:
    from .tracer import Tracer


@dataclass(frozen=True)
class Term:
    """Positions `coeff * (start + step * arange(size))` varying along `axis` of the index's shape; `tile`
    when they are exactly that tile's positions (then `start` is its begin)."""

    axis: int
    coeff: int
    start: int | None  # None: the tile's begin (computed on the device)
    size: int
    step: int
    tile: TileDim | None


@dataclass(frozen=True)
class Affine:
    """An int position tensor of shape `shape`: `offset + sum(terms)`; `offset` an int or a 0-d int Value."""

    shape: tuple[int, ...]
    offset: Any
    terms: tuple[Term, ...]


@dataclass(frozen=True)
class Factor:
    """One dim of the view: `size` positions, indexed by `term` (plus `offset` for the outermost)."""

    size: int
    term: Term
    offset: Any


def _int(v: Any) -> Any:
    v = v.value if isinstance(v, NamedConst) else v
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _int_value(v: Any) -> bool:
    return isinstance(v, Value) and v.space == "device" and not v.dtype.is_floating_point and v.dtype != torch.bool


def affine(v: Any, depth: int = 0) -> Affine | None:
    """`v` as an affine form in tile/arange positions, or None."""
    if _int(v) is not None:
        return Affine((), _int(v), ())
    if not _int_value(v) or depth > 32:
        return None
    if not v.shape:
        return Affine((), v, ())
    p = v.producer
    if not isinstance(p, Op):
        return None
    if p.kind == "iota" and len(v.shape) == 1:
        n = p.kwargs["n"]
        if not p.args:
            return Affine((n,), 0, (Term(0, 1, 0, n, 1, None),))
        d: TileDim = p.args[0][1]
        if d.dynamic or n != d.block_size:
            return None
        return Affine((n,), 0, (Term(0, 1, None, n, 1, d),))
    if p.kind == "to":
        return affine(p.args[0], depth + 1)
    if p.kind == "index":
        return _reindexed(affine(p.args[0], depth + 1), p.kwargs["items"], tuple(v.shape))
    if p.kind in ("add", "sub", "mul") and len(p.args) == 2:
        a, b = affine(p.args[0], depth + 1), affine(p.args[1], depth + 1)
        if a is None or b is None:
            return None
        if p.kind == "mul":
            return _scaled(a, b)
        if p.kind == "sub":
            if b.terms or _int(b.offset) is None:
                return None
            b = Affine(b.shape, -b.offset, ())
        return _summed(a, b, tuple(v.shape))
    return None


def _reindexed(a: Affine | None, items: tuple, shape: tuple[int, ...]) -> Affine | None:
    """`x[:, None, ...]`: the axes move, nothing else changes (any other item: None)."""
    if a is None or any(not (it is None or it == slice(None)) for it in items):
        return None
    axis_of, old = {}, 0
    for new, it in enumerate(items):
        if it is None:
            continue
        axis_of[old] = new
        old += 1
    for rest in range(old, len(a.shape)):  # trailing dims the index left out
        axis_of[rest] = rest - old + len(items)
    terms = tuple(Term(axis_of[t.axis], t.coeff, t.start, t.size, t.step, t.tile) for t in a.terms)
    return Affine(shape, a.offset, terms)


def _tile_begin(a: Affine) -> TileDim | None:
    """The tile whose `.begin` `a` is, when it is nothing else."""
    v = a.offset
    if a.terms or not isinstance(v, Value) or not isinstance(v.producer, Op) or v.producer.kind != "tile_begin":
        return None
    return v.producer.args[0]


def _aligned(a: Affine, rank: int) -> tuple[Term, ...]:
    """`a`'s terms with axes counted in a broadcast shape of `rank` dims (numpy aligns shapes at the right)."""
    shift = rank - len(a.shape)
    return tuple(Term(t.axis + shift, t.coeff, t.start, t.size, t.step, t.tile) for t in a.terms)


def _summed(a: Affine, b: Affine, shape: tuple[int, ...]) -> Affine | None:
    for x, y in ((a, b), (b, a)):  # `tile.begin + hl.arange(tile.block_size)`: the tile's positions
        d = _tile_begin(x)
        if d is not None and _int(y.offset) == 0 and len(y.terms) == 1:
            t = y.terms[0]
            if (t.coeff, t.start, t.step, t.size, t.tile) == (1, 0, 1, d.block_size, None) and not d.dynamic:
                return Affine(shape, 0, _aligned(Affine(y.shape, 0, (Term(t.axis, 1, None, t.size, 1, d),)),
                                                 len(shape)))
    if _int(a.offset) is not None and _int(b.offset) is not None:
        offset = a.offset + b.offset
    elif _int(b.offset) == 0:
        offset = a.offset
    elif _int(a.offset) == 0:
        offset = b.offset
    else:
        return None  # two device scalars: the sum would be a new op
    terms = _aligned(a, len(shape)) + _aligned(b, len(shape))
    if len({t.axis for t in terms}) != len(terms):
        return None  # two terms along one axis (`i + i`): not a plain run
    return Affine(shape, offset, terms)


def _scaled(a: Affine, b: Affine) -> Affine | None:
    if b.terms:
        a, b = b, a
    k = _int(b.offset)
    if b.terms or k is None or k <= 0 or _int(a.offset) is None:
        return None
    terms = tuple(Term(t.axis, t.coeff * k, t.start, t.size, t.step, t.tile) for t in a.terms)
    return Affine(a.shape, a.offset * k, terms)


def _factors(size: int, form: Affine, rank: int) -> list[Factor] | None:
    """The view dims one tensor dim of `size` splits into, outermost first, or None."""
    terms = sorted(_aligned(form, rank), key=lambda t: -t.coeff)
    if not terms or terms[-1].coeff != 1:
        return None
    coeffs = [t.coeff for t in terms]
    if len(set(coeffs)) != len(coeffs) or any(coeffs[i] % coeffs[i + 1] for i in range(len(coeffs) - 1)):
        return None
    if size % coeffs[0]:
        return None
    offset = form.offset
    if len(terms) > 1:
        if _int(offset) is None or offset % coeffs[0]:
            return None  # a device offset cannot be split among the view's dims
        offset //= coeffs[0]
    sizes = [size // coeffs[0]] + [coeffs[i] // coeffs[i + 1] for i in range(len(coeffs) - 1)]
    out = []
    for i, (t, n) in enumerate(zip(terms, sizes, strict=True)):
        if i and not _inside(t, n):
            return None
        out.append(Factor(n, Term(t.axis, 1, t.start, t.size, t.step, t.tile), offset if i == 0 else 0))
    return out


def _inside(t: Term, n: int) -> bool:
    """Do an inner term's positions all lie in [0, n) at compile time?"""
    if t.tile is not None:
        d = t.tile
        whole = d.begin == 0 and d.extent == d.block_size and d.parent is None and not d.dynamic
        return whole and d.block_size <= n
    return t.start is not None and t.start >= 0 and t.step > 0 and t.start + t.step * (t.size - 1) < n


@dataclass(frozen=True)
class SplitAccess:
    """`tensor[indices]` as a block of `tensor.view(shape)`: per view dim its factor (None: the dim is not
    indexed, read whole), and the axes of the result that no dim fills (size-1 axes: a `newaxis`)."""

    shape: tuple[int, ...]
    factors: tuple[Factor | None, ...]
    newaxes: tuple[int, ...]


def split_access(tensor_shape: tuple[int, ...], entries: list[Any]) -> SplitAccess | None:
    """The view and block that `tensor[entries]` (every entry an int position tensor) reads, or None."""
    if not entries or len(entries) > len(tensor_shape) or not all(_int_value(e) and e.shape for e in entries):
        return None
    if len(entries) == 1 and len(entries[0].shape) == 1:
        return None  # one 1-D index: a window or a gather already
    bshape = broadcast_shapes(*(tuple(e.shape) for e in entries))
    if bshape is None:
        return None
    forms = [affine(e) for e in entries]
    if any(f is None for f in forms):
        return None
    shape: list[int] = []
    factors: list[Factor | None] = []
    for size, form in zip(tensor_shape, forms, strict=False):
        dim_factors = _factors(size, form, len(bshape))
        if dim_factors is None:
            return None
        shape.extend(f.size for f in dim_factors)
        factors.extend(dim_factors)
    axes = [f.term.axis for f in factors if f is not None]
    if axes != sorted(set(axes)):
        return None  # an axis fills two dims, or the block would need a transpose
    if any(bshape[f.term.axis] != f.term.size for f in factors if f is not None):
        return None
    newaxes = tuple(a for a in range(len(bshape)) if a not in axes)
    if any(bshape[a] != 1 for a in newaxes):
        return None  # an index repeated along an axis (expanded): a gather
    rest = tuple(tensor_shape[len(entries):])
    return SplitAccess(tuple(shape) + rest, tuple(factors) + (None,) * len(rest), newaxes)


def _fits(f: Factor) -> bool:
    """Is a factor a tile, or a run whose positions provably stay inside the view dim? (A window is read at its
    start clamped into the dim, which would shift positions that run past it; those stay gathers.)"""
    t = f.term
    if t.tile is not None and _int(f.offset) == 0:
        return True
    start = ix.bounds_of_begin(t.tile) if t.start is None else (t.start, t.start)
    offset = ix.bounds(f.offset)
    if t.tile is not None and t.tile.dynamic or offset is None:
        return False
    return start[0] + offset[0] >= 0 and start[1] + offset[1] + t.step * (t.size - 1) < f.size


def split_view(t: Tracer, tensor: Value, index: Any, rng: Range, for_store: bool) -> tuple[Value, tuple] | None:
    """`tensor[index]` in device code as (view, index items) when it is a block of a reshaped view (see the
    module docstring); None to index `tensor` itself."""
    entries = list(index) if isinstance(index, tuple | list) else [index]
    split = split_access(tuple(tensor.shape), entries)
    if split is None or (for_store and split.newaxes) or not all(_fits(f) for f in split.factors if f is not None):
        return None
    view = tensor if split.shape == tuple(tensor.shape) else t.host_view(tensor, split.shape, "split", rng)
    ix = t.indexer
    items: list[tuple] = []
    newaxes = list(split.newaxes)
    for dim, f in enumerate(split.factors):
        while newaxes and (f is None or newaxes[0] < f.term.axis):  # the index's axes come before the rest
            items.append(("newaxis",))
            newaxes.pop(0)
        if f is None:
            items.append(("full",))
            continue
        term = f.term
        if term.tile is not None and _int(f.offset) == 0:
            items.append(ix.tile_item(view, dim, term.tile, rng, for_store))
            continue
        start = ix.begin(term.tile, rng) if term.start is None else term.start
        items.append(ix.window(f.size, (ix.add(f.offset, start, rng), term.size, term.step), rng))
    items.extend(("newaxis",) for _ in newaxes)
    return view, tuple(items)
