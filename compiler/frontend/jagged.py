"""`hl.jagged_tile(lanes)`: a loop over an inner dim whose length differs per lane of the enclosing tiles.

`lanes` holds each lane's end (`lengths[tile_b]`: row i of the tile of rows ends at lengths[i]). The loop runs
to the longest lane — `lanes.amax()`, computed on the device, so it is a device-bounded loop (a fori_loop with a
dynamic trip count, compiler/codegen/emit_kernel.py) — and position k of lane i is valid only below lanes[i].
The masks pass (compiler/frontend/masks.py) keeps the other positions out of reductions, dots, carried values and stores;
for that it must know which enclosing tile each axis of `lanes` runs along, which `lane_tiles` reads off the
ops that made it. May import the IR and frontend helpers only.
"""

from __future__ import annotations

import torch

from ..ir.tile_ir import Load, Op, TileDim, Value
from ..support.diagnostics import Range, UserError
from .ops import ELEMENTWISE, OpBuilder
from .values import TileLoopSpec

Lanes = tuple[TileDim | None, ...]  # per axis of a value: the enclosing tile it runs along (None: unknown)


def jagged_spec(ops: OpBuilder, args: list, kwargs: dict, rng: Range) -> TileLoopSpec:
    """The loop `hl.jagged_tile(lanes)` describes: a device-bounded `hl.tile(0, lanes.amax())` with lanes."""
    if len(args) != 1 or kwargs:
        raise UserError("HPL103", "hl.jagged_tile(lanes) takes one tensor of per-lane ends", rng)
    lanes = args[0]
    if not isinstance(lanes, Value) or lanes.space != "device" or not lanes.shape:
        raise UserError("HPL106", "hl.jagged_tile needs a tensor of per-lane ends loaded inside the loop "
                                  "(e.g. `lengths[tile_b]`), not a compile-time value or a scalar", rng)
    if lanes.dtype.is_floating_point or lanes.dtype == torch.bool:
        raise UserError("HPL106", f"hl.jagged_tile: the per-lane ends must be integers, not {lanes.dtype}", rng)
    tiles = lane_tiles(lanes)
    if any(t is None or t.api != "tile" for t in tiles) or len(set(tiles)) != len(tiles):
        raise UserError("HPL106", "hl.jagged_tile: every axis of the per-lane ends must run along a different "
                                  "enclosing hl.tile (load them as `lengths[tile_b]`, or compute them elementwise "
                                  "from such loads)", rng)
    longest = ops.reduce("amax", lanes, None, False, rng)
    assert isinstance(longest, Value)
    return TileLoopSpec("tile", (0,), (0,), (None,), False, None, ((0, longest),),
                        (lanes, tuple(t for t in tiles if t is not None)))


def lane_tiles(v: Value, depth: int = 0) -> Lanes:
    """Which enclosing tile each axis of `v` runs along, when the ops that made it say so."""
    unknown: Lanes = (None,) * len(v.shape)
    p = v.producer
    if depth > 32 or p is None:
        return unknown
    if isinstance(p, Load):
        found = _load_lanes(p, depth)
        return found if len(found) == len(v.shape) else unknown
    if not isinstance(p, Op):
        return unknown
    if p.kind == "iota" and p.args and isinstance(p.args[0], tuple) and p.args[0][0] == "tile":
        return (p.args[0][1],)
    if p.kind in ELEMENTWISE or p.kind == "mask":
        out: list[TileDim | None] = list(unknown)
        for a in p.args:
            if not isinstance(a, Value):
                continue
            off = len(v.shape) - len(a.shape)
            for i, t in enumerate(lane_tiles(a, depth + 1)):
                if t is None or a.shape[i] != v.shape[off + i]:
                    continue
                if out[off + i] not in (None, t):
                    return unknown
                out[off + i] = t
        return tuple(out)
    return unknown


def _load_lanes(p: Load, depth: int) -> Lanes:
    if p.tensor.rows:  # row `tile.id` of a 1-D tensor's rows view: the tile's positions (frontend/row_views.py)
        return (p.index[0][1],)
    out: list[TileDim | None] = []
    for it in p.index:
        kind = it[0]
        if kind == "tile":
            out.append(it[1])
        elif kind in ("full", "newaxis"):
            out.append(None)
        elif kind == "window":
            out.append(_window_tile(it))
        elif kind == "gather":
            out.extend(lane_tiles(it[1], depth + 1))
    return tuple(out)


def _window_tile(it: tuple) -> TileDim | None:
    """`x[tile.index + c]`: a window as long as the tile's block that starts at its begin plus a constant."""
    from .index_exprs import affine  # index_exprs imports this package's values

    _, start, size, step = it
    found = affine(start) if step == 1 else None
    if found is None or len(found[0]) != 1:
        return None
    (d, k), = found[0].items()
    return d if d.api == "tile" and k == d.block_size and size == d.block_size else None

