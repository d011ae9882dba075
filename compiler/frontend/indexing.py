"""Subscripts of host tensors in device code: the index items of a load or store, and hl.load / hl.store.

What a subscript entry becomes (see `ir.IndexItem`):
- a tile, `:`, None, an int, an hl.grid index, `tile.id`: as before;
- a 0-d int device value (`tile.begin + 5`, `bh // heads`, `starts[g]`): a `scalar` position;
- a 1-D int device value of the form `start + step * arange(n)` (`tile.index + off`, `begin + hl.arange(8)`)
  and a static slice (`3:67`, `:k`, `::2`): a `window` (exactly a tile's `.index`: that tile);
- any other int tensor (`idx[tile]`, a reversed run): a `gather` (or a scatter when stored to).
`Indexer` also indexes computed values (value_indexing.py, composed_reads.py), on the position arithmetic
of positions.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ..ir.tile_ir import TileDim, Value
from ..support.diagnostics import Range, UserError
from . import index_exprs as ix
from .composed_reads import ComposedReads
from .masked_positions import masked_in_range
from .positions import Positions, Run, const, is_int, offset
from .value_indexing import ValueIndexing
from .values import BlockTooLong, Tile, TileId

if TYPE_CHECKING:
    from .tracer import Tracer


def _start_fits(run: Run, size: int) -> bool:
    """Does a run of positions with a start computed on the device provably stay inside a dim of `size`? (A
    window is read at its start clamped into the dim, which only leaves its positions in place if so.)"""
    start, n, step = run
    if is_int(start):
        return True  # checked exactly by `window`
    b = ix.bounds(start)
    return b is not None and b[0] >= 0 and b[1] + (n - 1) * step < size


class Indexer(Positions, ValueIndexing, ComposedReads):
    """Builds index items; owned by the tracer (it emits the ops a computed position needs)."""

    def __init__(self, tracer: Tracer):
        self.t = tracer
        self.ops = tracer.ops
        self.mask: Value | None = None  # the extra_mask of the hl.load being indexed (masked_positions.py)

    # -- load / store index items -------------------------------------------------------------------------

    def items(self, tensor: Value, index: Any, rng: Range, for_store: bool = False) -> tuple[tuple, ...]:
        entries = list(index) if isinstance(index, tuple | list) else [index]
        flat: list[Any] = []
        for it in entries:
            if isinstance(it, tuple | list) and all(isinstance(x, Tile) for x in it):
                flat.extend(it)
            else:
                flat.append(it)
        ndim = len(tensor.shape)
        real = [it for it in flat if it is not None and it is not Ellipsis]
        if flat.count(Ellipsis) > 1:
            raise UserError("HPL202", "only one `...` is allowed in an index", rng)
        if len(real) > ndim:
            raise UserError("HPL105", f"too many indices for a {ndim}-d tensor", rng)
        out: list[tuple] = []
        dim = 0
        for it in flat:
            if it is Ellipsis:
                for _ in range(ndim - len(real)):
                    out.append(("full",))
                    dim += 1
                continue
            if it is None:
                out.append(("newaxis",))
                continue
            out.append(self._item(tensor, dim, it, rng, for_store))
            dim += 1
        while dim < ndim:
            out.append(("full",))
            dim += 1
        if sum(it[0] == "gather" for it in out) > 1:
            raise UserError("HPL202", "only one tensor-valued index per access is supported, or several that each "
                                      "vary along dims of their own (`x[r[:, None], c[None, :]]`); these vary along "
                                      "the same dims (a multi-dimensional gather)", rng)
        return tuple(out)

    def _item(self, tensor: Value, dim: int, it: Any, rng: Range, for_store: bool) -> tuple:
        size = tensor.shape[dim]
        if isinstance(it, Tile):
            return self.tile_item(tensor, dim, it.dim, rng, for_store)
        if isinstance(it, TileId):
            return ("id", it.dim)
        if isinstance(it, slice):
            moving = self._moving_slice(size, it)
            return moving if moving is not None else self._slice_item(size, it, rng)
        if is_int(it):
            c = const(it)
            if not -size <= c < size:
                raise UserError("HPL105", f"index {c} is out of range for size {size}", rng)
            return ("int", c % size)
        if isinstance(it, Value):
            if it.space != "device":
                raise UserError("HPL202", "a host tensor cannot index device code directly; load the indices in the "
                                          "loop first (`idx[tile]`)", rng)
            if it.dtype == torch.bool:
                raise UserError("HPL202", "boolean-mask indexing has no static shape; use torch.where", rng)
            if it.dtype.is_floating_point:
                raise UserError("HPL105", f"tensors used as indices must be integers, not {it.dtype}", rng)
            if not it.shape:
                return ("scalar", it)
            tile = self.exact_tile(it)
            if tile is not None:
                return self.tile_item(tensor, dim, tile, rng, for_store)
            run = self.run(it, rng) if len(it.shape) == 1 else None
            if run is not None and run[2] > 0 and not _start_fits(run, size):
                # a window read at a clamped start would shift the positions against the kernel's own masks
                return ("gather", it)
            if run is not None and run[2] > 0:
                if self.mask is not None and masked_in_range(it, size, self.mask):
                    try:
                        return self.window(size, run, rng)
                    except UserError:  # runs past the tensor where the mask drops it: read as a gather
                        return ("gather", it)
                return self.window(size, run, rng)
            return ("gather", it)
        raise UserError("HPL202", f"unsupported index `{type(it).__name__}`: use tiles, `:`, slices, None, integers "
                                  "or integer tensors", rng)

    def tile_item(self, tensor: Value, dim: int, d: TileDim, rng: Range, for_store: bool) -> tuple:
        t = self.t
        if not any(lp.dims and d.loop_id == lp.dims[0].loop_id for lp in t.loops):
            raise UserError("HPL202", f"tile `{d.name}` is used outside its loop", rng)
        if d.extent > tensor.shape[dim] and tensor.shape[dim] == 1 and not for_store:
            return ("full",)  # a size-1 dim broadcasts against the tile (e.g. a [1, N] bias)
        if d.dynamic and d.block_size > tensor.shape[dim]:
            raise BlockTooLong((d.loop_id, d.axis), tensor.shape[dim])  # the window is then the whole dim
        if d.extent > tensor.shape[dim] and self.mask is not None and not d.dynamic:
            positions = self.ops.arange(d.block_size, torch.int32, ("tile", d), rng)
            if masked_in_range(positions, tensor.shape[dim], self.mask):  # the mask drops what lies past the end
                return ("gather", positions)
        if d.extent > tensor.shape[dim]:
            raise UserError("HPL105", f"tile `{d.name}` spans {d.extent} but dim {dim} of this tensor has size "
                                      f"{tensor.shape[dim]}", rng)
        if d.api == "grid":
            return ("grid", d)
        ht = t.tensors.get(tensor.id)
        # a sub-tiled grid tile is as constrained as the sub-tiles that index tensors
        for owner in (d, d.parent):
            if owner is not None and owner.block_index is not None and ht is not None:
                t.block_dims.setdefault(owner.block_index, []).append((ht, dim))
        return ("tile", d)

    @staticmethod
    def _moving_slice(size: int, s: slice) -> tuple | None:
        """`x[..., start:start + n]` with `start` computed on the device and `n` a constant (int4_gemm reads
        `A[tm, 2 * tk.begin : 2 * tk.begin + 2 * block]`): a window, when the start's bounds keep all n
        positions inside the dim (else None: torch would shorten the slice, a window would not)."""
        start, stop = const(s.start), const(s.stop)
        if not isinstance(start, Value) or s.step not in (None, 1):
            return None
        base, n = offset(stop)
        lo_hi = ix.bounds(start)
        if base is not start or n <= 0 or lo_hi is None or lo_hi[0] < 0 or lo_hi[1] + n > size:
            return None
        return ("window", start, n, 1)

    @staticmethod
    def shape(tensor_shape: tuple[int, ...], items: tuple[tuple, ...]) -> list[int]:
        """Shape of `tensor[items]` (a load's value, or the region a store writes)."""
        shape: list[int] = []
        d = 0
        for it in items:
            kind = it[0]
            if kind == "newaxis":
                shape.append(1)
                continue
            if kind == "tile":
                shape.append(it[1].block_size)
            elif kind == "full":
                shape.append(tensor_shape[d])
            elif kind == "window":
                shape.append(it[2])
            elif kind == "gather":
                shape.extend(it[1].shape)
            d += 1
        return shape

    def load_store(self, name: str, args: list, kwargs: dict, rng: Range) -> Any:
        """`hl.load(t, [index], extra_mask=m)` / `hl.store(t, [index], v, extra_mask=m)`: subscripts whose
        positions where `m` is False read as 0 / are left unwritten."""
        want = 2 if name == "load" else 3
        args = list(args) + [kwargs.pop(k) for k in ("tensor", "index", "value")[len(args):want] if k in kwargs]
        if len(args) < want or not isinstance(args[0], Value):
            raise UserError("HPL103", f"hl.{name}(tensor, [index, ...]{', value' if name == 'store' else ''}, "
                                      "extra_mask=None)", rng)
        index = args[1]
        index = tuple(index) if isinstance(index, list | tuple) else (index,)
        mask = kwargs.pop("extra_mask", None)
        extra = set(kwargs) - {"eviction_policy"}
        if extra:
            raise UserError("HPL103", f"hl.{name} does not take {', '.join(sorted(extra))}", rng)
        if not self.t.in_device:
            raise UserError("HPL101", f"hl.{name} is device code: use it inside an hl.tile / hl.grid loop", rng)
        if name == "load":
            self.mask = mask
            try:
                value = self.t.load(args[0], index, rng)
            finally:
                self.mask = None
            return value if mask is None else self.ops.where(mask, value, 0, rng)
        value = args[2]
        if mask is not None:
            value = self.ops.where(mask, value, self.t.load(args[0], index, rng), rng)
        self.t.store_at(args[0], index, value, None, rng)
        return None
