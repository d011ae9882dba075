"""Abstract values the tracer binds to names besides IR `Value`s: tiles, modules, named scalars, lambdas."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..ir.tile_ir import TileDim
from ..support.diagnostics import Range, UserError


@dataclass(frozen=True)
class Module:
    """A module or callable known by its qualified name (`torch.nn.functional.softmax`)."""

    qualname: str


@dataclass(frozen=True)
class Tile:
    """A loop variable of `hl.tile` (a block of indices) or `hl.grid` (one index)."""

    dim: TileDim


@dataclass(frozen=True)
class TileId:
    """`tile.id`: the block number, usable as an index into a per-block buffer."""

    dim: TileDim


@dataclass(frozen=True)
class NamedConst:
    """A host float (or scalar kernel argument) used in device code; generated code passes it by name."""

    name: str
    value: float | int | bool
    is_arg: bool = False


class BlockSize(int):
    """`hl.register_block_size(n)`: an int that remembers which config block size it is."""

    index: int

    def __new__(cls, value: int, index: int) -> BlockSize:
        obj = super().__new__(cls, value)
        obj.index = index
        return obj


@dataclass(frozen=True)
class TileLoopSpec:
    """What `hl.tile(...)` / `hl.grid(...)` evaluates to; only meaningful as a `for` iterable."""

    api: str  # "tile" | "grid"
    extents: tuple[int, ...]
    begins: tuple[int, ...]
    block_sizes: tuple[int | BlockSize | None, ...]
    multi: bool  # called with a list/size (targets get a tuple)
    parent: TileDim | None = None  # hl.tile(t.begin, t.end): sub-tiles of an enclosing tile `t`
    # per dim (begin, end) when a bound of the loop is computed on the device (a 0-d int Value), else None;
    # None when every bound is known at compile time
    device_bounds: tuple | None = None
    lanes: tuple | None = None  # hl.jagged_tile: (per-lane ends Value, the enclosing tiles of its axes)


@dataclass(frozen=True)
class StaticRange:
    """`hl.static_range(...)`: a loop the trace unrolls, its index a compile-time int in each copy of the body."""

    items: range


class BlockTooLong(Exception):  # noqa: N818 - a request to trace again, not an error
    """A loop with device-computed bounds indexes a dim shorter than its block: trace again with the block
    cut to that dim (`caps`), so the window it reads is the whole dim."""

    def __init__(self, dim: tuple[int, int], size: int):
        super().__init__(dim, size)
        self.dim = dim  # (loop id, axis)
        self.size = size


DEVICE_SENTINEL = Module("torch.device")


@dataclass(eq=False)
class Closure:
    """A lambda (an epilogue passed in, or a kernel parameter's default): calling it traces its body inline
    with the names it captured where it was written."""

    fn: ast.FunctionDef
    env: dict[str, Any]
    foreign: bool = False  # from another file (a function argument's source): traced at the call's position


def lambda_def(node: ast.Lambda) -> ast.FunctionDef:
    """`lambda a, b: e` as the helper `def <lambda>(a, b): return e`, so calls inline it like a helper."""
    ret = ast.copy_location(ast.Return(node.body), node.body)
    fn = ast.FunctionDef(name="<lambda>", args=node.args, body=[ret], decorator_list=[], returns=None,
                         type_params=[])
    return ast.copy_location(fn, node)


class BlockSizeTable:
    """Config block sizes in order of appearance; missing entries come from `default`."""

    def __init__(self, given: list[int] | None, default: Callable[[int, int], int]):
        self.given = list(given or [])
        self.default = default
        self.values: list[int] = []
        self.extents: list[int] = []
        self.ranges: list[Range] = []

    def allocate(self, extent: int, rng: Range) -> BlockSize:
        index = len(self.values)
        value = self.given[index] if index < len(self.given) else self.default(index, extent)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise UserError("HPL109", f"block_sizes[{index}] must be a positive integer, got {value!r}", rng)
        self.values.append(value)
        self.extents.append(extent)
        self.ranges.append(rng)
        return BlockSize(value, index)
