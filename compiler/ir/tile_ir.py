"""The typed tile IR: what a kernel does, with a source range on every node.

Values are typed by torch meta tensors (shape + dtype), so broadcasting and type promotion follow PyTorch.
A kernel is a host `Region` whose statements are host ops and `GridLoop`s (one per outermost hl.tile /
hl.grid loop = one pallas_call); a grid loop's body is a device `Region` of ops, `Load`/`Store` of host
tensors, and nested `InnerLoop`s carrying values.
All sizes are concrete: the IR is built for one shape set and one config.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from ..support.diagnostics import Range

_ids = itertools.count()


@dataclass(eq=False)
class Value:
    """An SSA tensor value. `space` says whether it lives in the host function or in the kernel."""

    meta: torch.Tensor
    space: Literal["host", "device"]
    producer: Node | None = None
    hint: str | None = None  # user variable name, for readable generated code
    id: int = field(default_factory=lambda: next(_ids))
    wide: bool = False  # torch makes it 64-bit (int64/float64); here it is 32-bit (TPUs have no 64-bit vectors)
    # "read": integers read from an int64 tensor as int32; "grown": computed from such with `*`, `<<` or a sum,
    # so torch (64-bit) and the device (32-bit) agree on them only modulo 2**32 (compiler/frontend/ops.py)
    from_int64: str = ""

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.meta.shape)

    @property
    def dtype(self) -> torch.dtype:
        return self.meta.dtype


@dataclass(eq=False)
class Node:
    range: Range


@dataclass(eq=False)
class Op(Node):
    """A torch-level operation: `kind` names an emission template in codegen/exprs.py."""

    kind: str
    args: tuple[Any, ...]  # Values, Python scalars, dtypes, tuples thereof
    kwargs: dict[str, Any]
    out: Value | tuple[Value, ...]

    def outputs(self) -> tuple[Value, ...]:
        return self.out if isinstance(self.out, tuple) else (self.out,)


@dataclass(frozen=True)
class TileDim:
    """One loop dimension: `hl.tile` (blocked) or `hl.grid` (block 1, scalar index)."""

    loop_id: int
    axis: int  # position within its loop's dims
    extent: int
    block_size: int
    begin: int
    api: Literal["tile", "grid"]
    block_index: int | None  # index into config block_sizes, None when fixed
    name: str
    parent: TileDim | None = None  # `hl.tile(t.begin, t.end)`: this loop walks the range of grid tile `t`
    # bounds computed on the device (`hl.tile(offsets[g], offsets[g + 1])`): a 0-d int device Value or an
    # int each; then `begin`/`extent` are placeholders (0 and one block) and the trip count is dynamic
    lo: Value | int | None = None
    hi: Value | int | None = None
    # `hl.jagged_tile(lanes)`: a device tensor of per-lane ends whose axes are the enclosing tiles `lane_dims`;
    # the loop runs to their largest (`hi`) and position k of lane i is valid only below lanes[i]
    lanes: Value | None = None
    lane_dims: tuple[TileDim, ...] = ()

    @property
    def jagged(self) -> bool:
        return self.lanes is not None

    @property
    def dynamic(self) -> bool:
        """Are the loop's bounds read on the device? (a fori_loop with a dynamic trip count, always masked)"""
        return self.hi is not None

    @property
    def steps(self) -> int:
        """Blocks in the range (one for a dynamic range: its count is known only on the device)."""
        return max(1, -(-(self.extent - self.begin) // self.block_size))

    @property
    def partial(self) -> bool:
        """Can a block of this tile run past the end? Then its padding is masked (compiler/frontend/masks.py).

        A sub-tile's blocks live inside its grid tile's block, whose last one may itself be partial.
        """
        own = self.dynamic or (self.extent - self.begin) % self.block_size != 0
        return own or (self.parent is not None and self.parent.partial)

    @property
    def may_be_empty(self) -> bool:
        """Can a whole block lie past the end? (sub-tiles of a partial grid tile's last block)"""
        return self.parent is not None and self.parent.partial

    @property
    def tail(self) -> int:
        """Elements in the last block when it is partial (0 when the blocks divide the range)."""
        return (self.extent - self.begin) % self.block_size


IndexItem = tuple
"""How a Load/Store indexes one dim of a host tensor (the first element names the kind):
("tile", TileDim)              a loop tile's block of positions (dim kept, block_size long)
("full",)                      the whole dim
("newaxis",)                   a new size-1 dim (loads only)
("int", int)                   one constant position (dim dropped)
("grid", TileDim)              an hl.grid position (dim dropped)
("id", TileDim)                a tile's block number, `tile.id` (dim dropped)
("scalar", Value)              one position computed on the device: a 0-d int Value (dim dropped)
("window", start, size, step)  positions start, start+step, ... (`size` of them); start is an int or a 0-d
                               int Value (dim kept): `x[t.begin + hl.arange(8)]`, `x[:, 3:67]`, `x[::2]`
("gather", Value)              an int tensor of positions, torch advanced indexing: the dim is replaced by
                               the index tensor's dims (`table[idx[tile], :]`; a store scatters)
Computed positions (scalar, window start, gather) are analysed by `index_exprs`.
"""


@dataclass(eq=False)
class HostTensor:
    """A tensor of the host program that device code loads from or stores to."""

    value: Value  # its current host value
    name: str
    origin: Literal["arg", "alloc", "derived", "view"]
    init: Literal["empty", "zeros", "ones", "full", "copy"] | None = None  # copy: `x.clone()` of another tensor
    fill: float = 0.0
    base: HostTensor | None = None  # for a stored view (reshape/view of an arg or allocation): that tensor
    rows: bool = False  # the [n / block, block] view of a 1-D tensor read by launch-grid tiles (frontend/row_views.py)

    @property
    def root(self) -> HostTensor:
        """The argument or allocation a stored view writes through to (itself when not a view)."""
        return self.base.root if self.base is not None else self


@dataclass(eq=False)
class Load(Node):
    tensor: HostTensor
    index: tuple[IndexItem, ...]
    out: Value


@dataclass(eq=False)
class Store(Node):
    tensor: HostTensor
    index: tuple[IndexItem, ...]
    value: Value
    accumulate: str | None = None  # "add" for `x[...] += v`; "atomic_add": hl.atomic_add at tensor positions
    pred: Value | None = None  # under `if` on device values: a 0-d bool; elsewhere the old values stay
    # a scatter at a partial tile's positions: (axis of the index tensor, tile) whose padding positions write
    # nothing (set by compiler/frontend/masks.py)
    padding: tuple[tuple[int, TileDim], ...] = ()


@dataclass(eq=False)
class Carried:
    name: str
    init: Value  # value before the loop
    phi: Value  # the value inside the loop body at the start of an iteration
    next: Value | None = None  # value at the end of the body
    result: Value | None = None  # value after the loop


@dataclass(eq=False)
class InnerLoop(Node):
    dims: tuple[TileDim, ...]
    body: list[Node]
    carried: list[Carried]
    index: int = 0  # order among the kernel's inner loops (pallas_loop_type list position)
    depth: int = 1


@dataclass(eq=False)
class GridLoop(Node):
    dims: tuple[TileDim, ...]
    body: list[Node]
    header_range: Range | None = None


@dataclass(eq=False)
class Return(Node):
    values: tuple[Any, ...]  # Values / None / scalars
    is_tuple: bool


@dataclass(eq=False)
class KernelIR:
    name: str
    params: list[str]
    args: dict[str, Value | int | float | bool]
    host: list[Node]  # host ops, GridLoops, Return, in program order
    tensors: list[HostTensor]
    block_sizes: list[int]  # resolved config block sizes
    block_size_dims: list[list[tuple[HostTensor, int]]]  # per block size: (tensor, dim) it tiles
    inner_loops: list[InnerLoop]
    loads: list[Load]  # in source order
    range: Range
    observed_blocks: frozenset[int] = frozenset()  # config block sizes the kernel reads (tile.block_size/.id/.count)
    # (ast node, what the trace found it to be) for every expression evaluated and every name bound, in order;
    # read by compiler/facts.py for the editor's hovers, never by code generation
    seen: list[tuple[Any, Any]] = field(default_factory=list)
    block_extents: list[int] = field(default_factory=list)  # per config block size: the extent it tiles
    block_ranges: list[Range] = field(default_factory=list)  # per config block size: where it was registered
    empty_loops: int = 0  # device loops over a zero-size dimension: no step runs, none was traced


def tensor_params(ir: KernelIR) -> list[str]:
    """The kernel's tensor arguments in order: `pallas_load_buffer_count` has one entry per each, as in
    upstream Helion."""
    return [p for p in ir.params if isinstance(ir.args.get(p), Value)]


VIEW_OPS = frozenset({"reshape", "permute", "index", "broadcast_to"})  # host ops that alias their input in torch


def viewed(v: Value) -> Value:
    """The tensor a chain of torch views of `v` (`.view`, `.T`, `x[0]`, `.expand`) looks at; `v` when none."""
    while isinstance(v.producer, Op) and v.producer.kind in VIEW_OPS and isinstance(v.producer.args[0], Value):
        v = v.producer.args[0]
    return v


def walk(nodes: list[Node]):
    """Every node, depth first, in program order."""
    for n in nodes:
        yield n
        if isinstance(n, GridLoop | InnerLoop):
            yield from walk(n.body)


def drop_unused_loads(host: list[Node]) -> None:
    """Remove loads whose value nothing reads (a block indexed again is re-read where it is used), so they
    cost no operand, no DMA and no VMEM."""
    used: set[int] = set()
    regions: list[list[Node]] = []

    def visit(nodes: list[Node]) -> None:
        regions.append(nodes)
        for n in nodes:
            if isinstance(n, Op):
                used.update(a.id for a in flat(n.args) if isinstance(a, Value))
                used.update(a.id for a in flat(n.kwargs.values()) if isinstance(a, Value))
            elif isinstance(n, Load | Store):
                used.update(it[1].id for it in n.index if it[0] in ("scalar", "window", "gather")
                            and isinstance(it[1], Value))
                if isinstance(n, Store):
                    used.add(n.value.id)
                    if n.pred is not None:
                        used.add(n.pred.id)
            elif isinstance(n, Return):
                used.update(v.id for v in n.values if isinstance(v, Value))
            if isinstance(n, InnerLoop):
                used.update(v.id for v in bound_values(n))
                for c in n.carried:
                    used.add(c.init.id)
                    if c.next is not None:
                        used.add(c.next.id)
            if isinstance(n, GridLoop | InnerLoop):
                visit(n.body)

    visit(host)
    for region in regions:
        region[:] = [n for n in region if not (isinstance(n, Load) and n.out.id not in used)]


def bound_values(loop: InnerLoop) -> list[Value]:
    """The device values an inner loop's bounds read (`hl.tile(offsets[g], offsets[g + 1])`, the per-lane ends
    of `hl.jagged_tile`)."""
    return [b for d in loop.dims for b in (d.lo, d.hi, d.lanes) if isinstance(b, Value)]


def flat(items: Any):
    """The leaves of nested tuples and lists (an op's arguments, an index item), in order."""
    for a in items:
        if isinstance(a, tuple | list):
            yield from flat(a)
        else:
            yield a
