"""A value loaded from a tensor and indexed again (`x_block[local.begin, :, :]`) is re-read from that tensor
with the two indices composed, so the read happens where it is used and never needs a dynamic slice of a
vector. Positions past a partial tile's live rows read as 0; a slice with bounds computed on the device is
taken only where it provably lies inside the block's live rows.

`ComposedReads` is mixed into `Indexer` (indexing.py); it needs from it: t (the tracer), ops, shape and
the position arithmetic of positions.py.
"""

from __future__ import annotations

from typing import Any

import torch

from ..ir.tile_ir import Load, Op, TileDim, Value
from ..support.diagnostics import Range, UserError
from . import index_exprs as ix
from .positions import Run, const, int_value, is_int, offset, slice_text


def counts_from_tile_end(base: Value, entries: list, rng: Range) -> bool:
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
        if tiled[dim] and isinstance(e, slice) and any(is_int(b) and b < 0 for b in (e.start, e.stop)):
            raise _negative_slice(e, rng)
        found |= tiled[dim] and is_int(e) and e < 0
        dim += 1
    return found


class ComposedReads:
    """Re-reads a loaded block's tensor at composed positions."""

    def compose(self, load: Load, entries: list, rng: Range) -> Value:
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
                elif not (is_int(e) and e in (0, -1)):
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
            if tile is not None and any(is_int(b) and b < 0 for b in (e.start, e.stop)):
                raise _negative_slice(e, rng)
            if not all(b is None or is_int(b) for b in (e.start, e.stop, e.step)):
                rel, n, _ = self._device_slice(tile, extent, e, rng)  # proven live rows: no mask
                return self.window(size, (self.add(start, self.mul(rel, step, rng), rng), n, step), rng), None
            r = range(extent)[e]
            if len(r) == 0 or r.step <= 0:
                raise UserError("HPL105", f"the slice {slice_text(e)} of a dim of size {extent} is empty", rng)
            sub = (r.start, len(r), r.step)
        elif is_int(e):
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
        return (("int", pos) if is_int(pos) else ("scalar", pos)), guard

    def _device_slice(self, tile: TileDim | None, extent: int, e: slice, rng: Range) -> Run:
        """`blk[a + c0 : a + c1]` with `a` computed on the device: a window of the static length c1 - c0 whose
        start is clamped into the block (as lax.dynamic_slice does). It equals torch's slice only when the
        window lies inside the block's live rows, so that must be proven: from the bounds of `a`, or from the
        `if` conditions the read sits under (the branch not taken runs predicated and its reads are discarded).
        A tile's block has `end - begin` live rows; a whole dim or a window has `extent`."""
        (b0, c0), (b1, c1) = offset(e.start), offset(e.stop)
        if e.step not in (None, 1) or e.start is None or e.stop is None or b0 is not b1 or c1 <= c0 \
                or not (int_value(b0) and not b0.shape):
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
    return UserError("HPL105", f"the slice {slice_text(s)} of a tile's block has a negative bound; the block's "
                               "length varies at a partial tile, so count from `0` (or use `tile.begin` or "
                               "`hl.arange` positions)", rng)


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
        elif p.kind in ("ge", "gt") and a is base and is_int(b):
            out.append(const(b) + (p.kind == "gt"))
        elif p.kind in ("le", "lt") and b is base and is_int(a):
            out.append(const(a) + (p.kind == "lt"))
    return out


def _begin_within_live_rows(e: Value, moving: TileDim, tile: TileDim | None) -> bool:
    """Whether e is `local.begin` of a loop `hl.tile(tile.end - tile.begin)` (device-bounded, from 0): a row of
    the loaded tile's block that is always live, whatever the tile's window and however short its block."""
    p = e.producer
    return (tile is not None and isinstance(p, Op) and p.kind == "tile_begin" and p.args[0] is moving
            and is_int(moving.lo) and const(moving.lo) == 0 and moving.parent is None
            and _is_span_of(moving.hi, tile))


def _is_span_of(v: Any, tile: TileDim) -> bool:
    """Whether v is `tile.end - tile.begin` (the live rows of the tile's block)."""
    p = v.producer if isinstance(v, Value) else None
    if not isinstance(p, Op) or p.kind != "sub" or not all(isinstance(a, Value) for a in p.args):
        return False
    end, begin = p.args[0].producer, p.args[1].producer
    return (isinstance(end, Op) and isinstance(begin, Op) and end.kind == "tile_end" and begin.kind == "tile_begin"
            and end.args[0] is tile and begin.args[0] is tile)
