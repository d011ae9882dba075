"""Subscripts in device code: the index items of a load or store, and indexing a loaded value.

What a subscript entry becomes (see `ir.IndexItem`):
- a tile, `:`, None, an int, an hl.grid index, `tile.id`: as before;
- a 0-d int device value (`tile.begin + 5`, `bh // heads`, `starts[g]`): a `scalar` position;
- a 1-D int device value of the form `start + step * arange(n)` (`tile.index + off`, `begin + hl.arange(8)`)
  and a static slice (`3:67`, `:k`, `::2`): a `window` (exactly a tile's `.index`: that tile);
- any other int tensor (`idx[tile]`, a reversed run): a `gather` (or a scatter when stored to).
A loaded value indexed again (`x_block[local.begin, :, :]`) is re-read from the tensor it was loaded from
with the two indices composed, so the read happens where it is used and never needs a dynamic slice of a
vector; static slices of any value (`v[:, 1:3]`) stay value slices.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from .. import index_exprs as ix
from ..diagnostics import Range, UserError
from ..ir import Load, Op, TileDim, Value
from .masked_positions import masked_in_range
from .values import BlockTooLong, NamedConst, Tile, TileId

if TYPE_CHECKING:
    from .tracer import Tracer

Run = tuple  # (start: int | Value, size: int, step: int): the positions start + step * arange(size)


def _const(v: Any) -> Any:
    return v.value if isinstance(v, NamedConst) else v


def _is_int(v: Any) -> bool:
    v = _const(v)
    return isinstance(v, int) and not isinstance(v, bool)


def _int_value(v: Any) -> bool:
    return isinstance(v, Value) and v.space == "device" and not v.dtype.is_floating_point and v.dtype != torch.bool


def _start_fits(run: Run, size: int) -> bool:
    """Does a run of positions with a start computed on the device provably stay inside a dim of `size`? (A
    window is read at its start clamped into the dim, which only leaves its positions in place if so.)"""
    start, n, step = run
    if _is_int(start):
        return True  # checked exactly by `window`
    b = ix.bounds(start)
    return b is not None and b[0] >= 0 and b[1] + (n - 1) * step < size


class Indexer:
    """Builds index items; owned by the tracer (it emits the ops a computed position needs)."""

    def __init__(self, tracer: Tracer):
        self.t = tracer
        self.ops = tracer.ops
        self.mask: Value | None = None  # the extra_mask of the hl.load being indexed (masked_positions.py)

    # -- arithmetic on positions (ints stay Python ints) -------------------------------------------------

    def add(self, a: Any, b: Any, rng: Range) -> Any:
        if _is_int(a) and _is_int(b):
            return _const(a) + _const(b)
        if _is_int(b) and _const(b) == 0:
            return a
        if _is_int(a) and _const(a) == 0:
            return b
        return self.ops.binary("add", a, b, rng)

    def mul(self, a: Any, k: int, rng: Range) -> Any:
        if _is_int(a):
            return _const(a) * k
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
        if p.kind == "to" and _int_value(p.out):
            return self.run(p.args[0], rng, depth + 1) if isinstance(p.args[0], Value) else None
        if p.kind not in ("add", "sub", "mul") or len(p.args) != 2:
            return None
        a, b = p.args

        def vec(x: Any) -> Run | None:
            return self.run(x, rng, depth + 1) if isinstance(x, Value) and len(x.shape) == 1 else None

        def scalar(x: Any) -> bool:
            return _is_int(x) or (_int_value(x) and not x.shape)

        ra, rb = vec(a), vec(b)
        if p.kind == "add" and ra and scalar(b):
            return self.add(ra[0], b, rng), ra[1], ra[2]
        if p.kind == "add" and rb and scalar(a):
            return self.add(a, rb[0], rng), rb[1], rb[2]
        if p.kind == "sub" and ra and scalar(b):
            neg = -_const(b) if _is_int(b) else self.ops.unary("neg", b, rng)
            return self.add(ra[0], neg, rng), ra[1], ra[2]
        if p.kind == "mul" and ra and _is_int(b) and _const(b) > 0:
            return self.mul(ra[0], _const(b), rng), ra[1], ra[2] * _const(b)
        if p.kind == "mul" and rb and _is_int(a) and _const(a) > 0:
            return self.mul(rb[0], _const(a), rng), rb[1], rb[2] * _const(a)
        return None

    @staticmethod
    def exact_tile(v: Value) -> TileDim | None:
        """`tile.index` itself (all of the tile's positions, in order)."""
        p = v.producer
        if isinstance(p, Op) and p.kind == "iota" and p.args and p.kwargs["n"] == p.args[0][1].block_size:
            return p.args[0][1]
        return None

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
            raise UserError("HPL202", "only one tensor-valued index per access is supported (several would need a "
                                      "multi-dimensional gather)", rng)
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
        if _is_int(it):
            c = _const(it)
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
        start, stop = _const(s.start), _const(s.stop)
        if not isinstance(start, Value) or s.step not in (None, 1):
            return None
        base, n = _offset(stop)
        lo_hi = ix.bounds(start)
        if base is not start or n <= 0 or lo_hi is None or lo_hi[0] < 0 or lo_hi[1] + n > size:
            return None
        return ("window", start, n, 1)

    @staticmethod
    def _slice_item(size: int, s: slice, rng: Range) -> tuple:
        parts = [_const(p) for p in (s.start, s.stop, s.step)]
        if any(p is not None and not _is_int(p) for p in parts):
            raise UserError("HPL106", "slice bounds in device code must be integers known at compile time (use "
                                      "`hl.arange` plus an offset for a window that moves)", rng)
        if parts[2] is not None and parts[2] <= 0:
            raise UserError("HPL105", "slice step must be positive", rng)
        r = range(size)[slice(*parts)]
        if len(r) == 0:
            raise UserError("HPL105", f"the slice {_slice_text(s)} of a dim of size {size} is empty", rng)
        if r.start == 0 and r.step == 1 and len(r) == size:
            return ("full",)
        return ("window", r.start, len(r), r.step)

    @staticmethod
    def window(size: int, run: Run, rng: Range) -> tuple:
        start, n, step = run
        if _is_int(start):
            start = _const(start)
            last = start + (n - 1) * step
            if start < 0 or last >= size:
                raise UserError("HPL105", f"positions {start}..{last} are out of range for size {size}", rng)
            if start == 0 and step == 1 and n == size:
                return ("full",)
        elif n > size:
            raise UserError("HPL105", f"a window of {n} positions does not fit a dim of size {size}", rng)
        return ("window", start, n, step)

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

    # -- indexing a value ---------------------------------------------------------------------------------

    def index_value(self, base: Value, index: Any, rng: Range) -> Value:
        entries = list(index) if isinstance(index, tuple) else [index]
        entries = [_const(e) for e in entries]
        if base.space == "host" and any(isinstance(e, Value) for e in entries):
            return self.host_take(base, entries, rng)
        if entries.count(Ellipsis) > 1:
            raise UserError("HPL202", "only one `...` is allowed in an index", rng)
        real = [e for e in entries if e is not None and e is not Ellipsis]
        ndim = len(base.shape)
        if len(real) > ndim:
            raise UserError("HPL105", f"too many indices for a {ndim}-d value", rng)
        if Ellipsis in entries:
            at = entries.index(Ellipsis)
            entries[at:at + 1] = [slice(None)] * (ndim - len(real))
        for e in entries:
            if isinstance(e, Tile | TileId):
                raise UserError("HPL202", "a tile indexes tensors, not computed values; use tile.index - tile.begin "
                                          "positions or index the tensor itself", rng)
        from_end = self._counts_from_tile_end(base, entries, rng)
        static = None if from_end else self._static_items(base, entries, rng)
        if static is not None:
            return self.ops.index(base, tuple(static), rng)
        load = base.producer
        if not isinstance(load, Load):
            raise UserError("HPL202", "a value computed on the device can only be indexed by positions known at "
                                      "compile time; index the tensor it was loaded from instead", rng)
        return self._compose(load, entries, rng)

    @staticmethod
    def _counts_from_tile_end(base: Value, entries: list, rng: Range) -> bool:
        """Whether a negative integer indexes a dim that a tile loaded: it counts back from the tile's last live
        row, which a static index of the padded block cannot say. Negative slice bounds there are refused."""
        load = base.producer
        if not isinstance(load, Load):
            return False
        tiled = [it[0] == "tile" for it in load.index if it[0] != "gather"]  # one per dim of the loaded value
        if len(tiled) != len(base.shape):
            return False
        found, dim = False, 0
        for e in entries:
            if e is None:
                continue
            if tiled[dim] and isinstance(e, slice) and any(_is_int(b) and b < 0 for b in (e.start, e.stop)):
                raise _negative_slice(e, rng)
            found |= tiled[dim] and _is_int(e) and e < 0
            dim += 1
        return found

    def host_take(self, base: Value, entries: list, rng: Range) -> Value:
        """`x[idx]` in host code (wrapper code around the loops): torch advanced indexing, as jnp does it."""
        for e in entries:
            if isinstance(e, Value) and (e.space != "host" or e.dtype.is_floating_point):
                raise UserError("HPL202", "host code can index a tensor with integer or boolean host tensors only", rng)
            if isinstance(e, Value) and e.dtype == torch.bool:
                raise UserError("HPL202", "boolean-mask indexing has no static shape; use torch.where", rng)
        return self.ops.make("take", (base, tuple(entries)), {}, lambda t, items: t[items], rng, space="host")

    def host_put(self, base: Value, index: Any, value: Any, rng: Range) -> Value:
        """`x[idx] = v` in host code: a new array with those positions replaced (the caller rebinds the name)."""
        entries = [_const(e) for e in (list(index) if isinstance(index, tuple) else [index])]
        if any(isinstance(e, Value) and (e.space != "host" or e.dtype.is_floating_point) for e in entries):
            raise UserError("HPL202", "host code can index a tensor with integer host tensors only", rng)
        if isinstance(value, Value) and value.space != "host":
            raise UserError("HPL101", "the stored value must be a host tensor", rng)

        def meta(t, items, v):
            out = t.clone()
            out[items] = v
            return out

        return self.ops.make("index_put", (base, tuple(entries), value), {}, meta, rng, space="host")

    def _static_items(self, base: Value, entries: list, rng: Range) -> list | None:
        """The entries as ints and slices when none is computed on the device (else None)."""
        out: list[Any] = []
        dim = 0
        for e in entries:
            if e is None:
                out.append(None)
                continue
            size = base.shape[dim]
            dim += 1
            if isinstance(e, slice):
                if any(p is not None and not _is_int(p) for p in (e.start, e.stop, e.step)):
                    return None
                item = self._slice_item(size, e, rng)
                out.append(slice(None) if item[0] == "full" else slice(item[1], item[1] + (item[2] - 1) * item[3] + 1,
                                                                          item[3]))
            elif _is_int(e):
                if not -size <= e < size:
                    raise UserError("HPL105", f"index {e} is out of range for size {size}", rng)
                out.append(e % size)
            elif isinstance(e, Value) and _int_value(e) and len(e.shape) == 1:
                run = self.run(e, rng)
                if run is None or not _is_int(run[0]) or run[2] <= 0:
                    return None
                item = self.window(size, run, rng)
                out.append(slice(None) if item[0] == "full" else slice(item[1], item[1] + (item[2] - 1) * item[3] + 1,
                                                                          item[3]))
            elif isinstance(e, Value):
                if e.dtype == torch.bool:
                    raise UserError("HPL202", "boolean-mask indexing has no static shape; use torch.where", rng)
                if e.dtype.is_floating_point:
                    raise UserError("HPL105", f"tensors used as indices must be integers, not {e.dtype}", rng)
                return None
            else:
                raise UserError("HPL202", f"cannot index a computed value with `{type(e).__name__}`", rng)
        return out

    def _compose(self, load: Load, entries: list, rng: Range) -> Value:
        """Re-read `load`'s tensor at the positions `load.out[entries]` names."""
        src = load.tensor.value
        # which load item (and which of its dims) each dim of the loaded value comes from
        owners: list[int] = []
        for i, it in enumerate(load.index):
            if it[0] in ("tile", "full", "window", "newaxis"):
                owners.append(i)
            elif it[0] == "gather":
                owners.extend([i] * len(it[1].shape))
        per_item: dict[int, list] = {}
        new_axes_before: dict[int, int] = {}
        vdim = 0
        pending_new = 0
        for e in entries:
            if e is None:
                pending_new += 1
                continue
            item = owners[vdim]
            per_item.setdefault(item, []).append(e)
            new_axes_before.setdefault(item, pending_new)
            pending_new = 0
            vdim += 1
        while vdim < len(owners):
            per_item.setdefault(owners[vdim], []).append(slice(None))
            vdim += 1
        items: list[tuple] = []
        guards: list[tuple[int, Value]] = []  # (position in items, validity of that item's positions)
        for i, it in enumerate(load.index):
            items.extend([("newaxis",)] * new_axes_before.get(i, 0))
            es = per_item.get(i)
            if es is None:  # a dim the load dropped (int / scalar / grid position)
                items.append(it)
                continue
            if it[0] == "gather":
                if any(e != slice(None) for e in es):
                    raise UserError("HPL202", "a gathered value cannot be indexed again by computed positions; "
                                              "index the tensor with the combined positions", rng)
                items.append(it)
                continue
            e = es[0]
            if it[0] == "newaxis":
                if isinstance(e, slice) and e == slice(None):
                    items.append(it)
                elif not (_is_int(e) and e in (0, -1)):
                    raise UserError("HPL105", "a new size-1 dim can only be indexed by 0", rng)
                continue
            item, guard = self._compose_item(src, load, i, e, rng)
            if guard is not None:
                guards.append((len(items), guard))
            items.append(item)
        items.extend([("newaxis",)] * pending_new)
        value = self.t.load(src, tuple(items), rng, prepared=True)
        for at, g in guards:
            if g.shape:  # a run or gather: its positions lie along the dims that item produced
                lead = len(self.shape(src.shape, tuple(items[:at])))
                trail = len(value.shape) - lead - len(g.shape)
                g = self.ops.index(g, (slice(None),) * len(g.shape) + (None,) * trail, rng)
            value = self.ops.where(g, value, 0, rng)
        return value

    def _compose_item(self, src: Value, load: Load, i: int, e: Any, rng: Range) -> tuple[tuple, Value | None]:
        """The composed item, and (for a partial tile) where its positions are valid."""
        it = load.index[i]
        dim = sum(1 for x in load.index[:i] if x[0] != "newaxis")
        size = src.shape[dim]
        if it[0] == "full":
            start, extent, step, tile = 0, size, 1, None
        elif it[0] == "tile":
            tile = it[1]
            start, extent, step = self.begin(tile, rng), tile.block_size, 1
        else:  # window
            start, extent, step, tile = it[1], it[2], it[3], None
        if isinstance(e, slice):
            if e == slice(None):
                return it, None
            if tile is not None and any(_is_int(b) and b < 0 for b in (e.start, e.stop)):
                raise _negative_slice(e, rng)
            if not all(b is None or _is_int(b) for b in (e.start, e.stop, e.step)):
                rel, n, _ = self._device_slice(tile, extent, e, rng)  # proven live rows: no mask
                return self.window(size, (self.add(start, self.mul(rel, step, rng), rng), n, step), rng), None
            r = range(extent)[e]
            if len(r) == 0 or r.step <= 0:
                raise UserError("HPL105", f"the slice {_slice_text(e)} of a dim of size {extent} is empty", rng)
            sub = (r.start, len(r), r.step)
        elif _is_int(e):
            if not -extent <= e < extent:
                raise UserError("HPL105", f"index {e} is out of range for size {extent}", rng)
            if e < 0 and tile is not None:  # counts back from the tile's end (its last live row on a partial tile)
                pos = self.add(self.ops.scalar("tile_end", (tile,), rng), e, rng)
                guard = self.ops.binary("ge", pos, self.begin(tile, rng), rng) if tile.partial else None
                return ("scalar", pos), guard
            sub = e % extent
        elif isinstance(e, Value) and not e.shape:
            moving = ix.device_tile_positions(e, scalars=True) if tile is not None else None
            if moving is not None and _begin_within_live_rows(e, moving, tile):
                return ("scalar", self.add(start, e, rng)), None  # a live row: no mask needed
            b = ix.bounds(e) if moving is not None else None
            if moving is not None and (b is None or b[0] < 0 or b[1] >= extent):
                raise UserError("HPL106", f"a position computed from `{moving.name}` (a loop whose bounds are computed "
                                          f"on the device) cannot index a loaded block: nothing keeps it inside the "
                                          f"block's {extent} rows (`local.begin` of `hl.tile(t.end - t.begin)` over the "
                                          f"block's own tile `t` is); index the tensor itself", rng)
            sub = e
        else:
            run = self.run(e, rng) if len(e.shape) == 1 else None
            sub = run if run is not None and run[2] > 0 else ("gather", e)
            inner = _partial_tile_of(e)
            if inner is not None and inner is not tile:
                raise UserError("HPL202", f"positions from `{inner.name}` (a tile whose last block is partial) index a "
                                          "loaded block: its masked positions would be read; index the tensor "
                                          "itself with the tile", rng)
        guard = None
        if tile is not None and tile.partial:
            guard = self._valid(tile, sub, rng)  # positions past a partial tile read as 0
        if isinstance(sub, tuple) and sub and sub[0] == "gather":
            return ("gather", self.add(self.mul(sub[1], step, rng), start, rng)), guard
        if isinstance(sub, tuple):
            r_start, n, r_step = sub
            if tile is not None and r_start == 0 and n == tile.block_size and r_step * step == 1:
                return it, None
            pos = self.add(start, self.mul(r_start, step, rng), rng)
            return self.window(size, (pos, n, r_step * step), rng), guard
        pos = self.add(start, self.mul(sub, step, rng), rng)
        return (("int", pos) if _is_int(pos) else ("scalar", pos)), guard

    def _device_slice(self, tile: TileDim | None, extent: int, e: slice, rng: Range) -> Run:
        """`blk[a + c0 : a + c1]` with `a` computed on the device: a window of the static length c1 - c0 whose
        start is clamped into the block (as lax.dynamic_slice does). It equals torch's slice only when the
        window lies inside the block's live rows, so that must be proven: from the bounds of `a`, or from the
        `if` conditions the read sits under (the branch not taken runs predicated and its reads are discarded).
        A tile's block has `end - begin` live rows; a whole dim or a window has `extent`."""
        (b0, c0), (b1, c1) = _offset(e.start), _offset(e.stop)
        if e.step not in (None, 1) or e.start is None or e.stop is None or b0 is not b1 or c1 <= c0 \
                or not (_int_value(b0) and not b0.shape):
            raise UserError("HPL202", "a slice of a loaded block with bounds computed on the device needs a length "
                                      "known at compile time (`blk[s : s + 3]`, `blk[n - 3 : n]`, step 1); index "
                                      "the tensor itself with positions `start + hl.arange(n)`", rng)
        n = c1 - c0
        if n > extent:
            raise UserError("HPL105", f"this slice takes {n} rows of a block of {extent}", rng)
        b = ix.bounds(b0)
        lows = _lower_bounds(self.t.predicate, b0) + ([b[0]] if b is not None else [])
        inside_low = bool(lows) and max(lows) + c0 >= 0
        if tile is None:
            inside_high = b is not None and b[1] + c1 <= extent
        elif tile.partial or tile.dynamic:
            inside_high = not tile.dynamic and c1 <= 0 and _is_span_of(b0, tile)
        else:
            inside_high = (b is not None and b[1] + c1 <= extent) or (c1 <= 0 and _is_span_of(b0, tile))
        if not (inside_low and inside_high):
            raise UserError("HPL202", f"this {n}-row slice of a loaded block: nothing proves it lies inside the "
                                      "block's live rows, where torch would shorten or wrap it; put it under an `if` "
                                      "that keeps it inside (as `if n >= 3:` does for `blk[n - 3:n]`) or index the "
                                      "tensor itself", rng)
        first = b0 if c0 == 0 else self.ops.binary("add" if c0 > 0 else "sub", b0, abs(c0), rng)
        start = self.ops.clamp(first, 0, extent - n, rng)
        return start, n, 1

    def _valid(self, tile: TileDim, sub: Any, rng: Range) -> Value:
        """True where the positions a composed read names lie inside the tile's extent."""
        if isinstance(sub, tuple) and sub and sub[0] == "gather":
            rel = sub[1]
        elif isinstance(sub, tuple):
            rel = self.add(self.mul(self.ops.arange(sub[1], torch.int32, None, rng), sub[2], rng), sub[0], rng)
        else:
            rel = sub
        pos = self.add(self.begin(tile, rng), rel, rng)
        return self.ops.binary("lt", pos, tile.extent, rng)


def _partial_tile_of(v: Value, depth: int = 0) -> TileDim | None:
    """A partial tile whose `.index` the 1-D value is computed from (through +, -, *, casts), if any."""
    p = v.producer
    if not isinstance(p, Op) or depth > 32:
        return None
    if p.kind == "iota":
        tile = p.args[0][1] if p.args else None  # a device-bounded tile's own check says more (HPL106)
        return tile if tile is not None and tile.partial and not tile.dynamic else None
    if p.kind in ("add", "sub", "mul", "to"):
        for a in p.args:
            found = _partial_tile_of(a, depth + 1) if isinstance(a, Value) else None
            if found is not None:
                return found
    return None


def _negative_slice(s: slice, rng: Range) -> UserError:
    return UserError("HPL105", f"the slice {_slice_text(s)} of a tile's block has a negative bound; the block's "
                               "length varies at a partial tile, so count from `0` (or use `tile.begin` or "
                               "`hl.arange` positions)", rng)


def _slice_text(s: slice) -> str:
    parts = ["" if p is None else str(_const(p)) for p in (s.start, s.stop)]
    text = ":".join(parts)
    return text + (f":{_const(s.step)}" if s.step is not None else "")


def _offset(v: Any) -> tuple[Any, int]:
    """(base, c) with v = base + c, following + and - of ints (base None for an int)."""
    if v is None or _is_int(v):
        return None, _const(v) if v is not None else 0
    p = v.producer if isinstance(v, Value) else None
    if isinstance(p, Op) and p.kind in ("add", "sub") and len(p.args) == 2:
        a, b = p.args
        if _is_int(b):
            base, c = _offset(a)
            return base, c + (_const(b) if p.kind == "add" else -_const(b))
        if _is_int(a) and p.kind == "add":
            base, c = _offset(b)
            return base, c + _const(a)
    return v, 0


def _lower_bounds(pred: Value | None, base: Any) -> list[int]:
    """Lower bounds on `base` that the enclosing `if` conditions state (`base >= k`, `base > k`, `k <= base`)."""
    out: list[int] = []
    todo = [pred]
    while todo:
        v = todo.pop()
        p = v.producer if isinstance(v, Value) else None
        if not isinstance(p, Op) or len(p.args) != 2:
            continue
        a, b = p.args
        if p.kind == "logical_and":
            todo.extend([a, b])
        elif p.kind in ("ge", "gt") and a is base and _is_int(b):
            out.append(_const(b) + (p.kind == "gt"))
        elif p.kind in ("le", "lt") and b is base and _is_int(a):
            out.append(_const(a) + (p.kind == "lt"))
    return out


def _begin_within_live_rows(e: Value, moving: TileDim, tile: TileDim | None) -> bool:
    """Whether e is `local.begin` of a loop `hl.tile(tile.end - tile.begin)` (device-bounded, from 0): a row of
    the loaded tile's block that is always live, whatever the tile's window and however short its block."""
    p = e.producer
    return (tile is not None and isinstance(p, Op) and p.kind == "tile_begin" and p.args[0] is moving
            and _is_int(moving.lo) and _const(moving.lo) == 0 and moving.parent is None
            and _is_span_of(moving.hi, tile))


def _is_span_of(v: Any, tile: TileDim) -> bool:
    """Whether v is `tile.end - tile.begin` (the live rows of the tile's block)."""
    p = v.producer if isinstance(v, Value) else None
    if not isinstance(p, Op) or p.kind != "sub" or not all(isinstance(a, Value) for a in p.args):
        return False
    end, begin = p.args[0].producer, p.args[1].producer
    return (isinstance(end, Op) and isinstance(begin, Op) and end.kind == "tile_end" and begin.kind == "tile_begin"
            and end.args[0] is tile and begin.args[0] is tile)
