"""Subscripts with several index tensors that broadcast together (torch's advanced indexing), such as vLLM's
static fp8 quantizer: `scale[g[:, None], h[None, :]]`, `x[rows[:, None, :, None], cols[None, :, None, :]]`.

When each index tensor varies along its own dims of the broadcast shape (no two along the same dim), the
access is an outer product of per-dim accesses: each tensor is taken at its own dims only (`g[:, None]` is
`g`, a tile's positions; `rows[:, None, :, None]` is `rows`), each tensor dim is then indexed as one index
alone indexes it (a tile, a window, one position, or a gather), and the loaded block is permuted and
reshaped into torch's shape (a stored value the other way round). Dims of size 1 in the broadcast shape are
dropped first, so `rows` of a one-row group tile is a window of positions. Index tensors that vary along a
shared dim (a true zip of positions) are left as they are: `Indexer.items` refuses two gathers.

Only the tracer's loads and stores use this (tensor_access.py); it needs the indexer's ops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ..ir.tile_ir import Op, Value
from ..support.diagnostics import Range
from .positions import const, int_value
from .values import Tile

if TYPE_CHECKING:
    from .indexing import Indexer


@dataclass(frozen=True)
class OuterAccess:
    """An access with several broadcast index tensors, as per-dim indices (see the module docstring)."""

    index: tuple  # the subscript with each index tensor taken at its own dims only
    before: int  # dims of the access's block ahead of the indexed ones (from tiles and slices)
    own: tuple[int, ...]  # the broadcast dims each index tensor keeps, in the order the block has them
    shape: tuple[int, ...]  # the broadcast shape of the index tensors

    def after_load(self, indexer: Indexer, value: Value, rng: Range) -> Value:
        """The loaded block (per-dim form) in torch's shape."""
        ops, b, m = indexer.ops, self.before, len(self.own)
        order = sorted(range(m), key=lambda i: self.own[i])
        want = (*value.shape[:b], *self.shape, *value.shape[b + m:])
        if order == list(range(m)) and tuple(value.shape) == want:
            return value
        dtype = value.dtype
        value = _wide(ops, value, rng)
        if order != list(range(m)):
            rest = range(b + m, len(value.shape))
            value = ops.permute(value, (*range(b), *(b + i for i in order), *rest), rng)
        if tuple(value.shape) != want:
            value = ops.reshape(value, want, rng)
        return value if value.dtype == dtype else ops.cast(value, dtype, rng)

    def before_store(self, indexer: Indexer, value: Any, block: tuple[int, ...], rng: Range) -> Any:
        """A value to store, given in torch's shape, in the per-dim form of the block `block`."""
        if not isinstance(value, Value) or value.space != "device":
            return value  # a number, or a host value: store_at fills or refuses it
        ops, b, m = indexer.ops, self.before, len(self.own)
        full = (*block[:b], *self.shape, *block[b + m:])
        if len(value.shape) > len(full) or torch.broadcast_shapes(tuple(value.shape), full) != full:
            return value  # store_at reports the shapes
        kept = sorted(self.own)
        sorted_shape = (*block[:b], *(self.shape[a] for a in kept), *block[b + m:])
        order = [kept.index(a) for a in self.own]
        if tuple(value.shape) == sorted_shape == tuple(block):
            return value
        dtype = value.dtype
        value = _wide(ops, value, rng)
        if tuple(value.shape) != full:
            value = ops.broadcast_to(value, full, rng)
        if tuple(value.shape) != sorted_shape:
            value = ops.reshape(value, sorted_shape, rng)
        if order != list(range(m)):
            rest = range(b + m, len(value.shape))
            value = ops.permute(value, (*range(b), *(b + i for i in order), *rest), rng)
        return value if value.dtype == dtype else ops.cast(value, dtype, rng)


def _wide(ops: Any, value: Value, rng: Range) -> Value:
    """`value` as 32-bit floats when it holds narrower ones: the TPU compiler moves 16- and 8-bit values between
    dims far less readily (libtpu for v5e: "unsupported shape cast" for a [512, 16] bfloat16 block made
    [1, 512, 16, 1]); exact, and cast back after the move."""
    if value.dtype.is_floating_point and value.dtype.itemsize < 4:
        return ops.cast(value, torch.float32, rng)
    return value


def outer_access(indexer: Indexer, tensor: Value, index: Any, rng: Range) -> OuterAccess | None:
    """The per-dim form of `tensor[index]` when it has several index tensors, one of more than one dim, each
    varying along dims of the broadcast shape no other varies along, next to each other in the subscript;
    else None (the access is indexed as it is)."""
    entries = list(index) if isinstance(index, tuple | list) else [index]
    entries = [const(e) for e in entries]
    tensors = [i for i, e in enumerate(entries) if isinstance(e, Value) and int_value(e) and e.shape]
    if len(tensors) < 2 or all(len(entries[i].shape) == 1 for i in tensors):
        return None  # several 1-D index tensors are Helion's outer product already (indexing.py)
    if tensors != list(range(tensors[0], tensors[-1] + 1)) or any(e is None or e is Ellipsis for e in entries):
        return None
    try:
        shape = tuple(torch.broadcast_shapes(*(tuple(entries[i].shape) for i in tensors)))
    except RuntimeError:
        return None
    rank, taken = len(shape), set()
    own: list[list[int]] = []
    for i in tensors:
        v = entries[i]
        lead = rank - len(v.shape)
        axes = [lead + a for a, n in enumerate(v.shape) if n != 1]
        if taken & set(axes):
            return None  # two tensors along one dim: positions zipped, not an outer product
        taken.update(axes)
        own.append(axes)
    new = list(entries)
    for i, axes in zip(tensors, own, strict=True):
        v = entries[i]
        lead = rank - len(v.shape)
        new[i] = _own_dims(indexer, v, [a - lead for a in axes], rng)
    before = sum(isinstance(e, Tile | slice) for e in entries[:tensors[0]])
    return OuterAccess(tuple(new), before, tuple(a for axes in own for a in axes), shape)


def _own_dims(indexer: Indexer, v: Value, keep: list[int], rng: Range) -> Any:
    """`v` with only its dims `keep` (every other dim has size 1), computed again from what made it where that
    is plain (`g[:, None]` is `g`; `g[:, None] * k + r[None, :]` is `g * k + r` at the dims kept), so that
    positions (`tile.index`, runs) are recognised as such; else a reshape."""
    ops = indexer.ops
    if len(keep) == len(v.shape):
        return v
    p = v.producer
    if isinstance(p, Op) and p.kind in ("add", "sub", "mul") and len(p.args) == 2:
        args = []
        for a in p.args:
            if isinstance(a, Value) and a.shape:
                lead = len(v.shape) - len(a.shape)
                mine = [k - lead for k in keep if k >= lead]
                while mine and a.shape[mine[0]] == 1:  # a leading dim of size 1 broadcasts by itself
                    mine.pop(0)
                a = _own_dims(indexer, a, mine, rng)
            args.append(a)
        return ops.binary(p.kind, args[0], args[1], rng)
    if isinstance(p, Op) and p.kind == "to" and isinstance(p.args[0], Value) and p.args[0].shape == v.shape:
        return ops.cast(_own_dims(indexer, p.args[0], keep, rng), v.dtype, rng)
    if isinstance(p, Op) and p.kind == "index" and isinstance(p.args[0], Value) and \
            all(it is None or it == slice(None) for it in p.kwargs["items"]):
        src, items = p.args[0], list(p.kwargs["items"])
        items += [slice(None)] * (len(v.shape) - len(items))
        source_axes, s = [], 0
        for it in items:  # the source dim each dim of v comes from (None: a new dim)
            source_axes.append(None if it is None else s)
            s += it is not None
        if s == len(src.shape):
            kept_items = [items[k] for k in keep]
            inner = _own_dims(indexer, src, [source_axes[k] for k in keep if source_axes[k] is not None], rng)
            if all(it is not None for it in kept_items):
                return inner
            return ops.index(inner, tuple(kept_items), rng) if isinstance(inner, Value) else \
                ops.reshape(ops.full((), inner, v.dtype, rng), tuple(v.shape[k] for k in keep), rng)
    if isinstance(p, Op) and p.kind == "iota" and not keep and p.kwargs["n"] == 1:
        if not p.args:
            return 0
        if isinstance(p.args[0], tuple) and p.args[0][0] == "tile":  # the one position of a one-position block
            d = p.args[0][1]
            if not d.dynamic and d.steps == 1 and d.parent is None:
                return d.begin  # a loop of one step: its block starts where the loop does (provably aligned)
            return indexer.begin(d, rng)
    return ops.reshape(v, tuple(v.shape[k] for k in keep), rng)
