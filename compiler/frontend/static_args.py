"""Arguments of `hl.*` / `torch.*` calls and tensor methods that must be known at compile time: named
scalars unwrapped, integers (sizes, dims, bounds) and shapes, where a tile counts as its block size."""

from __future__ import annotations

from typing import Any

import torch

from ..ir.tile_ir import Value
from ..support.diagnostics import Range, UserError
from .values import NamedConst, Tile, TileId

_MAX_INT = 2**62


def unwrap(v: Any) -> Any:
    """A named scalar's value, a torch.Size as a tuple; anything else as it is."""
    if isinstance(v, NamedConst):
        return v.value
    if isinstance(v, torch.Size):
        return tuple(v)
    return v


def as_int(v: Any, what: str, rng: Range) -> int:
    """`v` as an int known at compile time; else a diagnostic naming `what` needs it and what `v` is."""
    v = unwrap(v)
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, Value | Tile | TileId):
            got = "a value computed on the device (such as tile.begin or a loaded tensor)"
        elif isinstance(v, float):
            got = f"the float {v!r}"
        else:
            got = f"a {type(v).__name__}"
        raise UserError("HPL106", f"{what} must be an integer known at compile time (from shapes, constants or "
                                  f"int arguments), not {got}", rng)
    if abs(v) > _MAX_INT:
        raise UserError("HPL105", f"{what} {v} is too large", rng)
    return v


def shape_arg(args: list, rng: Range) -> tuple[int, ...]:
    """A shape given as a list/tuple/Size or as several ints; tiles count as their block size."""
    if len(args) == 1 and isinstance(unwrap(args[0]), tuple | list):
        args = list(unwrap(args[0]))
    out = []
    for a in args:
        if isinstance(a, Tile):
            out.append(a.dim.block_size)
        else:
            n = as_int(a, "a shape entry", rng)
            if n < 0 and n != -1:
                raise UserError("HPL105", f"negative size {n} in a shape", rng)
            out.append(n)
    return tuple(out)


def shape_tiles(args: list) -> tuple:
    """Per shape entry, the tile it was given as (its dim then spans that tile), else None."""
    if len(args) == 1 and isinstance(unwrap(args[0]), tuple | list):
        args = list(unwrap(args[0]))
    return tuple(a.dim if isinstance(a, Tile) else None for a in args)

