"""An index made of tiles' positions broadcast against each other, `x[t0.index[:, None], t1.index[None, :]]`
(vLLM's block-scaled matmul writes `hl.load(a, [tile_m.index[None, :], tile_k.index[:, None]])`): in torch a
two-dimensional gather, but its positions are exactly the block `x[t0, t1]` with its dims in the order the
broadcast puts them. tensor_access.py loads that block and permutes it, so no gather is needed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ir.tile_ir import Op, TileDim, Value


def outer_tiles(entries: list[Any], ndim: int, exact_tile: Callable[[Value], TileDim | None]
                ) -> tuple[list[TileDim], tuple[int, ...]] | None:
    """For an index of `ndim` entries, each `tile.index` with None on every axis but one, all axes distinct:
    the tiles (per tensor dim) and the permutation that takes the block `x[tiles]` to the indexed result. None
    for any other index."""
    if ndim < 2 or len(entries) != ndim:
        return None
    tiles: list[TileDim] = []
    axes: list[int] = []
    for entry in entries:
        prod = entry.producer if isinstance(entry, Value) else None
        if not (isinstance(prod, Op) and prod.kind == "index" and isinstance(prod.args[0], Value)):
            return None
        items = prod.kwargs.get("items", ())
        if len(items) != ndim or sum(it is None for it in items) != ndim - 1 or slice(None) not in items:
            return None
        tile = exact_tile(prod.args[0]) if len(prod.args[0].shape) == 1 else None
        if tile is None:
            return None
        tiles.append(tile)
        axes.append(items.index(slice(None)))
    if sorted(axes) != list(range(ndim)):
        return None
    return tiles, tuple(axes.index(axis) for axis in range(ndim))
