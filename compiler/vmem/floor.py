"""A lower bound of the VMEM any config with given block sizes needs, from one trace at other block sizes.

The tuner compiles (traces) each block-size choice it considers, and many never fit VMEM: for attention,
the f32 scores of a (q block x kv block) tile alone overflow at large blocks. This bound lets it skip them
unseen. From one trace, each device value whose shape follows from the block sizes by rules known here —
a load's block of a loop tile, hl.zeros/hl.full over tiles, broadcasting elementwise ops, dots, permutes,
reductions, simple indexing —
gets a symbolic shape (per dim: a constant, or "block size i, at most the tile's extent"). A pallas_call's
VMEM total is its buffers plus the compiler temporaries. Every tensor a call loads or stores a block of
has a buffer at least as large as that block, whatever the loop strategy and buffer count (unpadded
elements count here, which no layout makes smaller); the temporaries estimate is at least the largest value of
each region times what that region holds (codegen/work.py `held_factor`). So `bytes(blocks)` — per call, the
blocks plus the most any region holds, the largest call — never exceeds the VMEM total of a config with
those block sizes. Values and accesses no rule covers are left out (a lower bound may ignore them).

It holds while the kernel's code is the same for every block size: a kernel that reads a block size
(`tile.block_size`, `.id`, `.count`) or a loop with bounds computed on the device (whose blocks are cut
to the data) gets no bound, and a sub-tile's dims are not modelled (its blocks are cut to its grid tile's). Every rule is checked against the traced shapes; a value it does not reproduce
is left out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..codegen.work import held_factor, padded_bytes
from ..frontend.fast_types import broadcast_shapes
from ..frontend.ops import ELEMENTWISE
from ..ir.tile_ir import GridLoop, InnerLoop, KernelIR, Load, Node, Op, Store, TileDim, Value, walk

# A dim: an int, or (block index, extent): min(blocks[index], extent) elements.
Dim = int | tuple[int, int]
SAME_SHAPE = {"mask", "softmax", "log_softmax", "cumsum", "cumprod"}
REDUCTIONS = {"sum", "mean", "amax", "amin", "prod", "argmax", "argmin", "logsumexp", "any", "all"}


@dataclass(frozen=True)
class CallFloor:
    blocks: tuple[tuple[tuple[tuple[Dim, ...], int], ...], ...]  # per tensor: each block accessed, itemsize
    # the modelled values' shapes and dtypes, and what their region holds of its largest (work.py held_factor)
    values: tuple[tuple[tuple[Dim, ...], torch.dtype, float], ...]

    def bytes(self, sizes: Sequence[int]) -> int:
        buffers = sum(max(math.prod(_sizes(dims, sizes, capped=True)) * itemsize for dims, itemsize in accesses)
                      for accesses in self.blocks)
        held = max((factor * padded_bytes(_sizes(dims, sizes, capped=True), dtype) for dims, dtype, factor in self.values),
                   default=0)
        return buffers + int(held)


@dataclass(frozen=True)
class VmemFloor:
    calls: tuple[CallFloor, ...]

    @staticmethod
    def of(ir: KernelIR) -> VmemFloor:
        """The bound from a trace (none when the kernel's code may differ with its block sizes)."""
        if ir.observed_blocks or any(d.dynamic for lp in ir.inner_loops for d in lp.dims):
            return VmemFloor(())
        return VmemFloor(tuple(_call(grid.body, ir.block_sizes) for grid in ir.host if isinstance(grid, GridLoop)))

    def bytes(self, blocks: Sequence[int]) -> int:
        """At most the VMEM total of every config whose block sizes are `blocks`."""
        return max((call.bytes(blocks) for call in self.calls), default=0)


def _call(body: list[Node], traced: Sequence[int]) -> CallFloor:
    shapes: dict[int, tuple[Dim, ...]] = {}
    _region(body, shapes, traced)
    values = {(shapes[v.id], v.dtype, factor): None for v, factor in _counted(body) if v.id in shapes}
    accesses: dict[int, dict[tuple[tuple[Dim, ...], int], None]] = {}
    for n in walk(body):
        if isinstance(n, Load | Store) and any(item[0] == "tile" for item in n.index):
            dims = _load_dims(n, traced, squeeze=True)
            if dims is not None:
                tensor = n.tensor.root
                accesses.setdefault(id(tensor), {})[(dims, tensor.value.dtype.itemsize)] = None
    return CallFloor(tuple(tuple(a) for a in accesses.values()), tuple(values))


def _sizes(dims: tuple[Dim, ...], blocks: Sequence[int], capped: bool) -> tuple[int, ...]:
    """A tile's dim is its block size, padded past the tile's end; `capped` counts only the elements
    inside it (a lower bound whichever holds)."""
    return tuple(d if isinstance(d, int) else min(blocks[d[0]], d[1]) if capped else blocks[d[0]] for d in dims)


def _region(nodes: list[Node], shapes: dict[int, tuple[Dim, ...]], traced: Sequence[int]) -> None:
    for n in nodes:
        dims = None
        if isinstance(n, Load):
            dims = _load_dims(n, traced)
        elif isinstance(n, Op) and not isinstance(n.out, tuple):
            dims = _op_dims(n, shapes, traced)
        elif isinstance(n, InnerLoop):
            for c in n.carried:  # a carried value keeps its initial value's shape
                if c.init.id in shapes and tuple(c.phi.shape) == tuple(c.init.shape):
                    shapes[c.phi.id] = shapes[c.init.id]
            _region(n.body, shapes, traced)
        if dims is not None and isinstance(n, Load | Op) and _sizes(dims, traced, capped=False) == tuple(n.out.shape):
            shapes[n.out.id] = dims  # the rule reproduces the traced shape


def _load_dims(n: Load | Store, traced: Sequence[int], squeeze: bool = False) -> tuple[Dim, ...] | None:
    """The shape of the block an access reads or writes (`squeeze`: without the new axes it adds)."""
    shape = n.tensor.value.shape
    dims: list[Dim] = []
    axis = 0
    for item in n.index:
        kind = item[0]
        if kind == "tile":
            dim = _tile_dim(item[1], traced)
            if dim is None:
                return None
            dims.append(dim)
        elif kind == "full":
            dims.append(shape[axis])
        elif kind == "newaxis":
            if not squeeze:
                dims.append(1)
            continue
        elif kind == "window":
            dims.append(item[2])
        elif kind not in ("int", "grid", "id", "scalar"):
            return None  # a gather's shape is its index's
        axis += 1
    dims += [shape[a] for a in range(axis, len(shape))]
    return tuple(dims)


def _tile_dim(td: TileDim, traced: Sequence[int]) -> Dim | None:
    """A tile's block: its block size, at most its extent; a sub-tile (`hl.tile(t.begin, t.end)`), whose
    blocks are also cut to its grid tile's, is not modelled."""
    if td.parent is not None:
        return None
    if td.block_index is None:
        return td.block_size
    return (td.block_index, td.extent - td.begin) if td.block_size == traced[td.block_index] else None


def _op_dims(n: Op, shapes: dict[int, tuple[Dim, ...]], traced: Sequence[int]) -> tuple[Dim, ...] | None:
    if n.kind == "full":  # hl.zeros / hl.full: its dims that span tiles are their blocks
        like = n.kwargs.get("like")
        if like is not None:
            return shapes.get(like.id)
        tiles = n.kwargs.get("tiles") or (None,) * len(n.kwargs["shape"])
        dims = tuple(size if t is None else _tile_dim(t, traced) for size, t in zip(n.kwargs["shape"], tiles, strict=True))
        return None if None in dims else dims
    args = [a for a in n.args if isinstance(a, Value)]
    if not args or any(a.id not in shapes for a in args):
        return None
    ins = [shapes[a.id] for a in args]
    kind = n.kind
    if kind in ELEMENTWISE or kind in SAME_SHAPE:
        # a tile against a constant of the same traced size does not broadcast: which one holds elsewhere
        # is unknown
        return broadcast_shapes(*ins) if kind not in SAME_SHAPE else ins[0]
    if kind == "dot" and len(ins[0]) == len(ins[1]) and len(ins[0]) in (2, 3):
        batch = broadcast_shapes(ins[0][:-2], ins[1][:-2])
        return None if batch is None else (*batch, ins[0][-2], ins[1][-1])
    if kind == "permute":
        return tuple(ins[0][d] for d in n.kwargs["dims"])
    if kind in REDUCTIONS:
        dim, keep = n.kwargs.get("dim"), n.kwargs.get("keepdim", False)
        if dim is None:
            return (1,) * len(ins[0]) if keep else ()
        gone = {d % len(ins[0]) for d in (dim if isinstance(dim, tuple) else (dim,))}
        return tuple(1 if i in gone else d for i, d in enumerate(ins[0]) if keep or i not in gone)
    if kind == "index":
        return _index_dims(ins[0], n.kwargs["items"])
    return None


def _index_dims(dims: tuple[Dim, ...], items: Any) -> tuple[Dim, ...] | None:
    items = items if isinstance(items, tuple) else (items,)
    consumed = sum(1 for it in items if isinstance(it, slice | int) and not isinstance(it, bool))
    if sum(1 for it in items if it is Ellipsis) > 1 or consumed > len(dims):
        return None
    out: list[Dim] = []
    pos = 0
    for it in items:
        if it is None:
            out.append(1)
        elif it is Ellipsis:
            out += dims[pos : pos + len(dims) - consumed]
            pos += len(dims) - consumed
        elif it == slice(None):
            out.append(dims[pos])
            pos += 1
        elif isinstance(it, int) and not isinstance(it, bool):
            pos += 1
        else:
            return None
    return (*out, *dims[pos:])


def _values(args: Any) -> list[Value]:
    out = []
    for a in args:
        if isinstance(a, tuple | list):
            out += _values(a)
        elif isinstance(a, Value):
            out.append(a)
    return out


def _counted(nodes: list[Node]) -> list[tuple[Value, float]]:
    """The values the temporaries estimate counts (work.py's `_largest_value`), in every region, each with what its
    region holds of its largest value (`held_factor`: a streamed elementwise region holds none)."""
    out: list[tuple[Value, float]] = []
    factor = held_factor(nodes)
    for n in nodes:
        if isinstance(n, InnerLoop):
            out += _counted(n.body)
        elif isinstance(n, Op) and n.kind != "alloc":
            out += [(v, factor) for v in n.outputs()]
        elif isinstance(n, Load):
            out.append((n.out, factor))
    return out
