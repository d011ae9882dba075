"""`hl.tile(...)` / `hl.grid(...)` calls as a `TileLoopSpec`: extents, begins and block sizes per dim, the
enclosing tile of a sub-tiling loop, and bounds computed on the device (device_loops.py traces the loop)."""

from __future__ import annotations

from typing import Any

import torch

from ..ir.tile_ir import Op, TileDim, Value
from ..support.diagnostics import Range, UserError
from .static_args import as_int, unwrap
from .values import BlockSize, TileLoopSpec


def loop_spec(api: str, args: list, kwargs: dict, rng: Range) -> TileLoopSpec:
    """What `hl.<api>(*args, **kwargs)` iterates over."""
    if not args:
        raise UserError("HPL103", f"hl.{api}(...) needs a size", rng)
    first = unwrap(args[0])
    multi = isinstance(first, tuple | list)
    block = kwargs.get("block_size")
    if multi:
        second = unwrap(args[1]) if len(args) > 1 else None
        if second is not None and (not isinstance(second, tuple | list) or len(second) != len(first)):
            raise UserError("HPL103", f"hl.{api}(begins, ends) needs two lists of equal length", rng)
        pairs = [[b, e] for b, e in zip(first, second, strict=True)] if second is not None else [[e] for e in first]
        bounds = [_device_bounds(api, p, rng) for p in pairs]
        if any(b is not None for b in bounds):
            blocks = _device_blocks(block, len(pairs), rng)
            for i, p in enumerate(pairs):  # the dims with compile-time bounds
                if bounds[i] is None:
                    lo, hi = (0, as_int(p[0], f"hl.{api} size", rng)) if len(p) == 1 else \
                        (as_int(p[0], "begin", rng), as_int(p[1], "end", rng))
                    if hi - lo < 0:
                        raise UserError("HPL105", f"hl.{api} over a negative range ({lo}..{hi})", rng)
            return TileLoopSpec(api, tuple(0 if b is not None else p[-1] for b, p in zip(bounds, pairs, strict=True)),
                                tuple(0 if b is not None or len(p) == 1 else p[0] for b, p in
                                      zip(bounds, pairs, strict=True)), blocks, True, None, tuple(bounds))
        extents = tuple(as_int(e, f"hl.{api} size", rng) for e in first)
        begins = (0,) * len(extents)
        if second is not None:
            begins, extents = extents, tuple(as_int(e, f"hl.{api} end", rng) for e in second)
    else:
        parent = _enclosing_tile(args) if len(args) == 2 else None
        bounds = _device_bounds(api, args, rng) if parent is None else None
        if bounds is not None:
            return TileLoopSpec(api, (0,), (0,), _device_blocks(block, 1, rng), False, None, (bounds,))
        if parent is not None:
            begins, extents = (0,), (parent.block_size,)
        elif len(args) > 1:
            begins, extents = (as_int(args[0], "begin", rng),), (as_int(args[1], "end", rng),)
        else:
            begins, extents = (0,), (as_int(first, f"hl.{api} size", rng),)
    for b, e in zip(begins, extents, strict=True):
        if e - b < 0:  # an empty range (a zero-size dimension) runs no step, as in torch (device_loops.py)
            raise UserError("HPL105", f"hl.{api} over a negative range ({b}..{e})", rng)
    n = len(extents)
    if block is None:
        blocks: tuple = (None,) * n
    elif isinstance(block, tuple | list):
        if len(block) != n:
            raise UserError("HPL103", f"block_size has {len(block)} entries for {n} dims", rng)
        blocks = tuple(b if isinstance(b, BlockSize) or b is None else as_int(b, "block_size", rng) for b in block)
    else:
        blocks = (block if isinstance(block, BlockSize) else as_int(block, "block_size", rng),) * n
    if api == "grid" and block is not None:
        raise UserError("HPL103", "hl.grid takes no block_size", rng)
    parent = None if multi else _enclosing_tile(args) if len(args) == 2 else None
    if parent is not None and api != "tile":
        raise UserError("HPL101", f"sub-tiling `{parent.name}` needs hl.tile", rng)
    return TileLoopSpec(api, extents, begins, blocks, multi, parent)


def _device_blocks(block: Any, n: int, rng: Range) -> tuple:
    if isinstance(block, tuple | list):
        if len(block) != n:
            raise UserError("HPL103", f"block_size has {len(block)} entries for {n} dims", rng)
        return tuple(b if isinstance(b, BlockSize) or b is None else as_int(b, "block_size", rng) for b in block)
    return (block if isinstance(block, BlockSize) or block is None else as_int(block, "block_size", rng),) * n


def _device_bounds(api: str, args: list, rng: Range) -> tuple | None:
    """(begin, end) of `hl.tile(begin, end)` / `hl.tile(end)` when a bound is a scalar computed on the
    device (loaded offsets, `tile.end - tile.begin`); None when both are known at compile time."""
    given = [unwrap(a) for a in args[:2]]
    if not any(isinstance(v, Value) for v in given):
        return None
    for v in given:
        if isinstance(v, Value) and (v.shape or v.space != "device" or v.dtype.is_floating_point
                                     or v.dtype == torch.bool):
            what = "a tensor" if v.shape else "a host value" if v.space != "device" else f"a {v.dtype} scalar"
            raise UserError("HPL106", f"hl.{api} bounds must be integers: compile-time ints or integer scalars "
                                      f"computed in the loop (one element of a tensor), not {what}", rng)
    if api != "tile":
        raise UserError("HPL106", "hl.grid bounds must be known at compile time; use hl.tile for a range "
                                  "computed on the device", rng)
    ints = [v if isinstance(v, Value) else as_int(v, "a loop bound", rng) for v in given]
    return (0, ints[0]) if len(ints) == 1 else (ints[0], ints[1])


def _enclosing_tile(args: list) -> TileDim | None:
    """`(t.begin, t.end)` of one launch-grid tile `t`: the bounds of a sub-tiling loop."""
    ops = [a.producer for a in args if isinstance(a, Value)]
    if len(ops) != 2 or any(not isinstance(o, Op) for o in ops):
        return None
    if ops[0].kind == "tile_begin" and ops[1].kind == "tile_end" and ops[0].args[0] == ops[1].args[0]:
        return None if ops[0].args[0].dynamic else ops[0].args[0]
    return None
