"""Lower one grid loop of the IR to a Pallas call plan: operands, BlockSpecs, memory, buffering, scratch.

Decisions made here (and nowhere else):
- each distinct (tensor, index pattern, streaming loop) becomes one pallas_call operand;
- accesses at grid level get a top-level BlockSpec block; accesses inside an inner loop are either
  `resident` (block spans the loop's whole extent, sliced in VMEM: unroll / fori_loop) or left in HBM
  and streamed by a nested `pltpu.emit_pipeline` (emit_pipeline);
- stores into a kernel argument or into a tensor that is also read are aliased in place.
How each loop runs (launch-grid order, inner-loop strategy) is loops.py's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ..frontend import index_exprs as ix
from ..ir.chips import Chip
from ..ir.plan import CallPlan, Operand, Scratch
from ..ir.plan import InnerLoop as PlanInnerLoop
from ..ir.tile_ir import (
    GridLoop,
    HostTensor,
    InnerLoop,
    KernelIR,
    Load,
    Node,
    Op,
    Store,
    TileDim,
    tensor_params,
    viewed,
    walk,
)
from ..support.diagnostics import Range, UserError
from . import outputs
from .dma import DmaAccess, plan_dma
from .loops import (
    dma_loop_type,
    grid_order,
    loop_note,
    loop_strategy,
    multi_dim_tile_loops,
    shortest_indexed_dim,
)
from .placement import DEVICE_POSITIONS, CannotStream, Placer, kept_dims, layout_tiling, masks_pick, py_name
from .work import (
    carried_dtype,
    largest_gather_tables,
    padded_bytes,
    region_work,
    temporaries_bytes,
    vreg_elems,
)

JNP_DTYPES = {
    torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float32", torch.int32: "int32",
    torch.int16: "int16", torch.int8: "int8", torch.uint8: "uint8", torch.bool: "bool",
    torch.float8_e4m3fn: "float8_e4m3fn", torch.float8_e5m2: "float8_e5m2", torch.int64: "int32",
    torch.float64: "float32",
}


@dataclass
class OperandLayout:
    """An operand plus what the emitter needs to index it."""

    tensor: HostTensor
    items: tuple[tuple, ...]
    loop: InnerLoop | None  # the inner loop that slices (resident) or streams (hbm) it
    kind: str  # input | output | inout
    memory: str
    block_shape: tuple[int | None, ...]
    buffer_count: int
    ref_name: str
    index_map: str
    grid_axes: tuple[int, ...]
    inner_axes: tuple[int, ...]
    ranges: list[Range] = field(default_factory=list)
    arg_slot: int | None = None
    inner_index_map: str | None = None
    scalar_only: bool = True  # every access reads one element (an SMEM table candidate)
    reads_old: bool = False  # inout: the old block is copied in (outputs.py); else its input side stays in HBM

    def block_dims_visible(self) -> tuple[int, ...]:
        """The block's shape as the kernel sees it (squeezed dims dropped)."""
        return tuple(b for b in self.block_shape if b is not None)


@dataclass
class CallLayout:
    grid: GridLoop
    name: str
    operands: list[OperandLayout]
    by_node: dict[int, OperandLayout]
    scratch: dict[tuple[int, str], str]  # (inner loop index, carried name) -> scratch ref name
    scratch_plan: list[Scratch]
    plan: CallPlan | None = None
    order: tuple[int, ...] = ()  # grid.dims positions in launch-grid order (loop_orders)
    modes: dict[int, tuple[str, ...]] = field(default_factory=dict)  # id(node) -> per-dim placement mode
    dma: dict[int, DmaAccess] = field(default_factory=dict)  # id(node) -> its row copies (codegen/dma.py)
    loop_type: object = None  # the config's pallas_loop_type, with loops that copy rows by DMA as fori_loop
    widened: bool = False  # a launch-grid block the TPU cannot tile is read whole (placement.Placer.widened)

    @property
    def grid_dims(self) -> list[TileDim]:
        return [self.grid.dims[i] for i in self.order] if self.order else list(self.grid.dims)

    @property
    def inputs(self) -> list[OperandLayout]:
        return [o for o in self.operands if o.kind in ("input", "inout")]

    @property
    def outputs(self) -> list[OperandLayout]:
        return [o for o in self.operands if o.kind in ("output", "inout")]


def build_call(ir: KernelIR, grid: GridLoop, call_index: int, config: dict, chip: Chip) -> CallLayout:
    order = grid_order(ir, grid, config.get("loop_orders"))
    loops = multi_dim_tile_loops(ir)
    pinned = isinstance(config.get("loop_orders"), list | tuple) and grid in loops and \
        loops.index(grid) < len(config["loop_orders"])
    if pinned:
        return _build_call(ir, grid, call_index, config, chip, order)
    try:
        return _build_whole(ir, grid, call_index, config, chip, order)
    except UserError as exc:
        if exc.code != "HPL204":
            raise
        # an output block the grid would leave and come back to (a scatter's rows, a whole-dim row store):
        # move the launch axes some output block does not follow inside the others, so its visits are
        # consecutive; if that cannot satisfy every output the diagnostic stands
        probe = _build_call(ir, grid, call_index, config, chip, order, check_revisits=False)
        free = {order[a] for o in probe.outputs if o.memory not in ("smem", "dma") and not (o.memory == "hbm" and not o.reads_old)
                for a in range(len(order)) if a not in o.grid_axes}
        better = [i for i in order if i not in free] + [i for i in order if i in free]
        if better == order:
            raise
        return _build_whole(ir, grid, call_index, config, chip, better)


def _build_whole(ir: KernelIR, grid: GridLoop, call_index: int, config: dict, chip: Chip,
                 order: list[int]) -> CallLayout:
    """`_build_call`, placing again with a tensor's whole array as one VMEM block when it is written and
    accessed through several block layouts (`out[t] = ...; out[t.index + n] = ...`): every access then slices
    that block, which stays resident over the grid and is written back once (its grid axes run in order)."""
    whole: frozenset[int] = frozenset()
    while True:
        try:
            return _build_call(ir, grid, call_index, config, chip, order, whole=whole)
        except outputs.BlockConflict as exc:
            size = max((math.prod(t.value.shape) * t.value.dtype.itemsize for t in ir.tensors
                        if viewed(t.root.value).id == exc.root), default=0)
            if exc.root in whole or size > chip.default_scoped_vmem_bytes // 4:  # too large to hold for the call
                raise
            whole = whole | {exc.root}


def _build_call(ir: KernelIR, grid: GridLoop, call_index: int, config: dict, chip: Chip,
                order: list[int], check_revisits: bool = True, whole: frozenset[int] = frozenset()) -> CallLayout:
    dma = plan_dma(ir, grid, config, chip)
    loop_type = dma_loop_type(ir, config.get("pallas_loop_type"), dma)
    bufs = config.get("pallas_load_buffer_count")
    dims = [grid.dims[i] for i in order]  # the launch grid in the chosen loop order (first = outermost)
    grid_dims = {(d.loop_id, d.axis): i for i, d in enumerate(dims)}
    grid_names = [py_name(d.name) for d in dims]
    operands: dict[tuple, OperandLayout] = {}
    by_node: dict[int, OperandLayout] = {}
    # pallas_load_buffer_count positions: each tensor argument's, also for the views of it that are loaded
    slots = {ir.args[name].id: i for i, name in enumerate(tensor_params(ir))}

    def visit(nodes: list[Node], loops: list[InnerLoop]) -> None:
        for n in nodes:
            if isinstance(n, InnerLoop):
                visit(n.body, loops + [n])
            elif isinstance(n, Load | Store):
                access(n, loops)

    placer = Placer(grid_dims, grid_names, whole)
    modes: dict[int, tuple[str, ...]] = {}

    def access(n: Load | Store, loops: list[InnerLoop]) -> None:
        inner_ids = {lp.dims[0].loop_id: lp for lp in loops}
        streaming = None
        for it in n.index:
            for lid in _item_loops(it):
                lp = inner_ids.get(lid)
                if lp is not None and (streaming is None or lp.depth < streaming.depth):
                    streaming = lp
        strategy = loop_strategy(loop_type, streaming) if streaming else None
        memory = "vmem_block" if streaming is None else ("hbm" if strategy == "emit_pipeline" else "resident")
        if id(n) in dma:
            dma_access(n, dma[id(n)])
            return
        if placer.keeps_whole(n):
            memory = "vmem_block"  # one block for the call, shared by every access
        if memory == "hbm" and not _streamable(n, streaming):
            memory = "resident"  # emit_pipeline cannot fetch this operand's blocks: the loop slices it in VMEM
        if memory == "hbm" and not any(
            it[0] == "tile" and it[1].loop_id == loops[-1].dims[0].loop_id for it in n.index
        ) and loops[-1] is not streaming:
            raise UserError("HPL101", "with emit_pipeline, accesses in nested loops must be indexed by the pipelined loop", n.range)
        try:
            placement = placer.place(n, streaming, memory)
        except CannotStream:  # positions an inner BlockSpec cannot name: the whole extent stays in VMEM
            memory = "resident"
            placement = placer.place(n, streaming, memory)
        params = ", ".join(grid_names) or "_"
        shape = tuple(n.tensor.value.shape)
        one = [len(shape) == len(placement.dims) and shape[d] == 1 and (isinstance(n, Load) or _one_step(it))
               for d, it in enumerate(it for it in n.index if it[0] != "newaxis")]
        # a dim of size 1 read has one block, whatever the position (Helion drops a size-1 dim's offset); one
        # written by a loop of one step too: its index is then the constant 0, not a program id the TPU compiler
        # cannot prove a multiple of the row packing (v5e: "Offsets along tiled dimensions must be aligned to
        # tiles ... divisible by the tile dimension 4" for a [1, N] float8 array written under emit_pipeline)
        outer = ["0" if one[d] else dp.outer for d, dp in enumerate(placement.dims)]
        index_map = f"lambda {params}: ({', '.join(outer)}{',' if len(outer) == 1 else ''})"
        inner_map = None
        if memory == "hbm":
            inner_params = ", ".join(py_name(td.name) for td in streaming.dims)
            inner = ["0" if one[d] else dp.inner for d, dp in enumerate(placement.dims)]
            inner_map = f"lambda {inner_params}: ({', '.join(inner)}{',' if len(inner) == 1 else ''})"
        key = (n.tensor.value.id, memory, id(streaming) if memory != "vmem_block" else None, placement.block_shape,
               index_map, inner_map)
        is_store = isinstance(n, Store)
        op = operands.get(key)
        if op is None:
            op = OperandLayout(
                tensor=n.tensor, items=n.index, loop=streaming, kind="output" if is_store else "input",
                memory=memory, block_shape=placement.block_shape, buffer_count=2, ref_name="", index_map=index_map,
                grid_axes=tuple(sorted(set().union(*(dp.grid_axes for dp in placement.dims)))),
                inner_axes=tuple(d for d, dp in enumerate(placement.dims) if dp.inner_walk), inner_index_map=inner_map,
            )
            operands[key] = op
        elif (is_store and op.kind == "input") or (not is_store and op.kind == "output"):
            op.kind = "inout"
        if not all(it[0] in _SCALAR_ITEMS for it in n.index):
            op.scalar_only = False
        if not is_store and op.arg_slot is None:
            op.arg_slot = slots.get(viewed(n.tensor.root.value).id)
        op.ranges.append(n.range)
        by_node[id(n)] = op
        modes[id(n)] = tuple(dp.mode for dp in placement.dims)

    def dma_access(n: Load | Store, d: DmaAccess) -> None:
        """One operand per tensor copied by DMA: the whole array in HBM, its rows copied where accessed."""
        key = (d.src.value.id, "dma")
        op = operands.get(key)
        is_store = isinstance(n, Store)
        if op is None:
            op = OperandLayout(tensor=d.src, items=n.index, loop=d.loop, kind="output" if is_store else "input",
                               memory="dma", block_shape=tuple(d.src.value.shape), buffer_count=d.slots, ref_name="",
                               index_map="", grid_axes=(), inner_axes=(), scalar_only=False)
            operands[key] = op
        elif (is_store and op.kind == "input") or (not is_store and op.kind == "output"):
            op.kind = "inout"
        if not is_store and op.arg_slot is None:
            op.arg_slot = slots.get(viewed(n.tensor.root.value).id)
        op.ranges.append(n.range)
        by_node[id(n)] = op
        modes[id(n)] = ("dma",) * len(n.tensor.value.shape)

    visit(grid.body, [])
    ops = outputs.resolve(ir, grid, list(operands.values()), by_node, dims, check_revisits)
    for o in ops:
        if o.memory == "dma":
            continue  # its buffer's slots were chosen with the copies (codegen/dma.py)
        if o.arg_slot is not None and o.kind != "output":
            o.buffer_count = _buffer_count(bufs, o.arg_slot, o.buffer_count)
        if o.memory != "hbm" and all(b is not None and b >= s for b, s in zip(o.block_shape, o.tensor.value.shape, strict=True)):
            o.buffer_count = 1  # a block equal to the whole array is fetched once
    for o in ops:
        if _scalar_table(o):
            o.memory, o.block_shape, o.buffer_count, o.grid_axes = "smem", tuple(o.tensor.value.shape), 1, ()
    _index_tables(ops, dma)
    _name_refs(ops)
    scratch_names, scratch_plan = _scratch(grid, loop_type, ops, _positioned_loops(grid, by_node))
    scratch_plan += _dma_scratch(dma, {s.name for s in scratch_plan} | {o.ref_name for o in ops})
    layout = CallLayout(grid, f"{py_name(ir.name)}_kernel" + (f"_{call_index}" if call_index else ""), ops, by_node,
                        scratch_names, scratch_plan, order=tuple(order), modes=modes, dma=dma, loop_type=loop_type,
                        widened=placer.widened)
    layout.plan = _call_plan(layout, loop_type, chip)
    return layout


def _index_tables(ops: list[OperandLayout], dma: dict[int, DmaAccess]) -> None:
    """The int32 tensors DMA indices read, whole in SMEM (one operand each, shared with a scalar table)."""
    for d in dma.values():
        for t in d.tables:
            if any(o.memory == "smem" and o.tensor.value.id == t.value.id for o in ops):
                continue
            ops.append(OperandLayout(tensor=t, items=(), loop=None, kind="input", memory="smem",
                                     block_shape=tuple(t.value.shape), buffer_count=1, ref_name="",
                                     index_map="", grid_axes=(), inner_axes=(), ranges=[d.node.range]))


def _dma_scratch(dma: dict[int, DmaAccess], taken: set[str]) -> list[Scratch]:
    """A VMEM buffer and its DMA semaphores for each access copied by DMA."""
    out: list[Scratch] = []
    for d in dma.values():
        base = py_name(d.node.tensor.name) + {"gather": "_gathered", "scatter": "_scattered", "window_load": "_window",
                                              "window_store": "_window_out"}[d.kind]
        name, i = base, 1
        while name in taken:
            name, i = f"{base}_{i}", i + 1
        taken |= {name, f"{name}_sem"}
        d.buffer, d.sem = name, f"{name}_sem"
        dtype = d.src.value.dtype
        role = {"gather": "dma_buffer", "window_load": "dma_buffer", "scatter": "dma_staging",
                "window_store": "dma_window_out"}[d.kind]
        out.append(Scratch(name, d.buffer_shape, JNP_DTYPES[dtype], carried_dtype(dtype).itemsize, role, d.node.range))
        out.append(Scratch(d.sem, (d.slots,), "int32", 4, "dma_sem", d.node.range))
        if d.kind == "window_store":  # each slot's count of rows copied out, for its wait
            out.append(Scratch(f"{name}_count", (d.slots,), "int32", 4, "counter", d.node.range))
            taken.add(f"{name}_count")
    return out


def alias_param(o: OperandLayout) -> str:
    """The kernel parameter of an operand's input side: a write-only in/out operand's old contents stay in
    HBM (it is passed only to be aliased)."""
    if o.kind == "inout" and not o.reads_old and o.memory != "hbm":
        return f"{o.ref_name.rsplit('_', 1)[0]}_in_hbm"
    return o.ref_name


def _buffer_count(spec: object, arg_slot: int, default: int) -> int:
    """`pallas_load_buffer_count`: one entry per tensor argument (an int, for all of them, is read too)."""
    if spec is None:
        return default
    if isinstance(spec, int):
        return spec
    if isinstance(spec, list | tuple) and arg_slot < len(spec) and spec[arg_slot] is not None:
        return int(spec[arg_slot])
    return default


SMEM_TABLE_BYTES = 64 * 1024  # a scalar table larger than this stays in VMEM


_SCALAR_ITEMS = ("int", "grid", "id", "newaxis", "scalar")


def _scalar_table(o: OperandLayout) -> bool:
    """An input only ever read one element at a time (every dim indexed by one position)."""
    value = o.tensor.value
    return (o.kind == "input" and o.memory not in ("hbm", "dma") and bool(value.shape) and o.scalar_only
            and value.meta.numel() * value.dtype.itemsize <= SMEM_TABLE_BYTES)


def _item_loops(it: tuple) -> frozenset[int]:
    """Loops whose positions an index item reads."""
    if it[0] in ("tile", "grid", "id"):
        return frozenset({it[1].loop_id})
    if it[0] in ("scalar", "gather"):
        return ix.deps(it[1]).loops
    if it[0] == "window":
        return ix.deps(it[1]).loops
    return frozenset()


def _positioned_loops(grid: GridLoop, by_node: dict[int, OperandLayout]) -> set[int]:
    """Inner loops whose body reads a VMEM-resident operand at the loop's own positions (under emit_pipeline
    that position must be counted, since the pipeline body does not see its step)."""
    out: set[int] = set()

    def visit(nodes: list[Node], loops: list[InnerLoop]) -> None:
        for n in nodes:
            if isinstance(n, InnerLoop):
                visit(n.body, loops + [n])
            elif isinstance(n, Load | Store) and by_node.get(id(n)) is not None and by_node[id(n)].memory != "hbm":
                used = set().union(*(_item_loops(it) for it in n.index)) if n.index else set()
                out.update(lp.index for lp in loops if lp.dims[0].loop_id in used)

    visit(grid.body, [])
    return out


def _name_refs(ops: list[OperandLayout]) -> None:
    used: dict[str, int] = {}
    for o in ops:
        base = py_name(o.tensor.name)
        suffix = {"hbm": "_hbm", "dma": "_hbm", "smem": "_smem"}.get(o.memory, "_ref")
        name = base + suffix
        if name in used:
            used[name] += 1
            name = f"{base}_{used[name]}{suffix}"
        else:
            used[name] = 0
        o.ref_name = name


def _scratch(grid: GridLoop, loop_type: object, ops: list[OperandLayout],
             positioned: set[int]) -> tuple[dict, list[Scratch]]:
    """Carried values of emit_pipeline loops live in VMEM scratch; a loop that needs its own position (tile
    attributes, masks, operands it slices resident in VMEM) counts its steps in SMEM."""
    names: dict[tuple[int, str], str] = {}
    plan: list[Scratch] = []
    # loops that slice a resident operand need their position (a pipeline's nested in a loop of the same operand too)
    sliced = {it[1].loop_id for o in ops if o.memory == "resident" for it in o.items
              if it[0] in ("tile", "grid", "id") and it[1].loop_id != grid.dims[0].loop_id}
    # a streamed block read back over several pipeline steps is copied in at its first step: that needs the step
    revisited = {id(o.loop) for o in ops if o.memory == "hbm" and o.reads_old and outputs.first_visit(
        outputs.inner_axes_used(o), [d.steps for d in o.loop.dims], [d.name for d in o.loop.dims])}

    def visit(nodes: list[Node]) -> None:
        for n in nodes:
            if isinstance(n, InnerLoop):
                if loop_strategy(loop_type, n) == "emit_pipeline":
                    for c in n.carried:
                        name = f"{py_name(c.name)}_scratch"
                        if any(s.name == name for s in plan):
                            name = f"{py_name(c.name)}_{n.index}_scratch"
                        names[(n.index, c.name)] = name
                        dtype = c.phi.dtype
                        plan.append(Scratch(name, tuple(c.phi.shape) or (1,), JNP_DTYPES[dtype], carried_dtype(dtype).itemsize,
                                            "carried", n.range))
                    if _uses_own_position(n) or id(n) in revisited or n.dims[0].loop_id in sliced or n.index in positioned:
                        name = f"{py_name(n.dims[0].name)}_step"
                        if any(s.name == name for s in plan):
                            name = f"{py_name(n.dims[0].name)}_{n.index}_step"
                        names[(n.index, STEP)] = name
                        plan.append(Scratch(name, (1,), "int32", 4, "counter", n.range))
                visit(n.body)

    visit(grid.body)
    return names, plan


STEP = "#step"  # key of an emit_pipeline loop's step counter in CallLayout.scratch


def _carried_elems(loop: InnerLoop) -> float:
    """32-bit elements of what one iteration of `loop` hands the next (a matmul's accumulator, a softmax's
    running max and sum), laid out in tiles: a fori_loop body reads and writes them every iteration."""
    return sum((vreg_elems(c.phi) for c in loop.carried), 0.0)


def _uses_own_position(loop: InnerLoop) -> bool:
    """Does the loop body read its tiles' begin/end/index/id or mask them? (emit_pipeline then needs a step
    counter). Any op naming one of the loop's tiles in its arguments does."""
    own = {(d.loop_id, d.axis) for d in loop.dims}
    for n in walk(loop.body):
        if isinstance(n, Op):
            for dim in _flat_items(list(n.args) + list(n.kwargs.values())):
                if isinstance(dim, TileDim) and (dim.loop_id, dim.axis) in own:
                    return True
    return False


def _flat_items(items: list):
    for a in items:
        if isinstance(a, tuple | list):
            yield from _flat_items(list(a))
        else:
            yield a


def _one_step(it: tuple) -> bool:
    """Is this index item a loop position (a tile or an hl.grid index) of a loop with one step, always 0?"""
    if it[0] not in ("tile", "grid", "id"):
        return False
    td: TileDim = it[1]
    return not td.dynamic and td.begin == 0 and td.steps == 1 and td.parent is None


def _streamable(n: Load | Store, loop: InnerLoop) -> bool:
    """Can emit_pipeline fetch this access's blocks? Its blocks are counted from 0 in whole blocks, and the last
    block of a partial tile is copied up to the next layout tile, which must not pass the array's end (the
    TPU pads arrays to whole tiles; interpret mode checks the exact bounds)."""
    shape = n.tensor.value.shape
    d = 0
    for it in n.index:
        if it[0] == "newaxis":
            continue
        if it[0] == "tile" and it[1].loop_id == loop.dims[0].loop_id:
            td: TileDim = it[1]
            if td.begin % td.block_size or td.may_be_empty:
                return False
            if td.partial and shape[d] % layout_tiling(d, shape, n.tensor.value.dtype):
                return False
        d += 1
    return True


def _call_plan(layout: CallLayout, loop_type: object, chip: Chip) -> CallPlan:
    grid = layout.grid
    operands = []
    dma_ids = frozenset(layout.dma)
    dims = layout.grid_dims
    for o in layout.operands:
        dtype = o.tensor.value.dtype
        block, axes = o.block_shape, o.grid_axes
        if o.memory == "dma":  # one execution's rows (a new set for each step of the loop around the copies)
            mine = [d for d in layout.dma.values() if layout.by_node.get(id(d.node)) is o]
            block = max((d.copy_shape for d in mine), key=math.prod)
            axes = tuple(range(len(dims))) if any(d.loop is None for d in mine) else ()
        operands.append(Operand(
            name=o.ref_name, tensor=o.tensor.name, kind=o.kind, array_shape=tuple(o.tensor.value.shape),
            dtype=JNP_DTYPES[dtype], itemsize=carried_dtype(dtype).itemsize, memory=o.memory, block_shape=block,
            buffer_count=o.buffer_count, grid_axes=axes,
            inner_loop=o.loop.index if o.loop is not None else None, inner_axes=o.inner_axes,
            index_map=o.inner_index_map if o.memory == "hbm" else o.index_map, ranges=tuple(o.ranges),
            arg_slot=o.arg_slot, reads_old=o.reads_old,
        ))
    inner = []

    def visit(nodes: list[Node]) -> None:
        for n in nodes:
            if isinstance(n, InnerLoop):
                d = n.dims[0]
                trips = 1
                for dim in n.dims:  # a device-bounded dim counts its most steps (its range fits in the arrays)
                    span = shortest_indexed_dim(grid.body, dim) if dim.dynamic else None
                    trips *= -(-span // dim.block_size) if span else dim.steps
                inner.append(PlanInnerLoop(
                    index=n.index, strategy=loop_strategy(loop_type, n), extent=d.extent - d.begin,
                    block_size=d.block_size, trips=trips, range=n.range,
                    operands=tuple(o.ref_name for o in layout.operands if o.loop is n),
                    work=region_work(n.body, dma_ids), note=loop_note(n, loop_type, grid.body),
                    carried_elems=_carried_elems(n),
                ))
                visit(n.body)

    visit(grid.body)
    semantics = []
    outs = [o for o in layout.operands if o.kind in ("output", "inout")]
    # grid-level prefetches and scattered rows need the steps in order (no megacore split)
    ordered = any(d.kind == "scatter" or (d.prefetch and d.loop is None) for d in layout.dma.values())
    for axis in range(len(dims)):
        # parallel axes must form a prefix of the grid: after the first arbitrary axis, all are arbitrary
        parallel = all(axis in o.grid_axes for o in outs) and "arbitrary" not in semantics and not ordered
        semantics.append("parallel" if parallel else "arbitrary")
    grid_shape = tuple(d.steps for d in dims)
    return CallPlan(
        name=layout.name, range=grid.header_range or grid.range, grid=grid_shape,
        dimension_semantics=tuple(semantics), operands=tuple(operands), scratch=tuple(layout.scratch_plan),
        inner_loops=tuple(inner), outer_work=region_work(grid.body, dma_ids),
        temporaries_bytes=temporaries_bytes(grid.body, lambda lp: loop_strategy(loop_type, lp), dma_ids,
                                            _picked_region_bytes(layout), chip.name),
        vmem_limit_bytes=chip.default_scoped_vmem_bytes,
        gather_tables=tuple((n.tensor.name, n.range, b) for n, b in largest_gather_tables(grid.body, dma_ids)),
        widened_blocks=layout.widened,
    )


def _picked_region_bytes(layout: CallLayout) -> dict[int, int]:
    """Per access of a device-known position on a block's row or lane dim: the padded bytes of what it reads or
    merges, the value with that dim whole (the temporaries count it as a value). A position masked out of its
    block dim (placement.masks_pick) reads the whole dim, and a row stored there is merged into it; so does
    Mosaic's own shift of a 32-bit row (libtpu for v5e: one head of [2, 2048, 16, 128] f32 in 1024-row blocks
    needed 3.8 MiB of temporaries beside its 4 MiB group)."""
    out: dict[int, int] = {}
    for n in walk(layout.grid.body):
        op = layout.by_node.get(id(n))
        if not isinstance(n, Load | Store) or op is None or op.memory in ("smem", "dma"):
            continue
        kept = kept_dims(n.index, layout.modes[id(n)])
        visible = op.block_dims_visible()
        if len(visible) != len(kept):
            continue
        last = len(kept) - 1
        picked = [p for p in range(max(0, last - 1), last + 1) if kept[p][3] and kept[p][1][0] in DEVICE_POSITIONS
                  and (isinstance(n, Load) or (p < last and masks_pick(False, n.tensor.value.dtype, kept[last][3])))]
        if not picked:
            continue
        shape = []  # the block region read (or merged), before positions are picked or gathered from it
        for p, (_, it, mode, picks) in enumerate(kept):
            if p in picked or mode == "block" or it[0] in ("gather", "full"):
                shape.append(visible[p])
            elif not picks:
                shape.append(it[1].block_size if it[0] == "tile" else it[2] if it[0] == "window" else visible[p])
        out[id(n)] = padded_bytes(tuple(shape), n.tensor.value.dtype)
    return out


def operand_vmem_bytes(op: Operand) -> int:
    """Padded VMEM bytes one operand takes (all its buffers)."""
    dtype = {v: k for k, v in JNP_DTYPES.items() if k not in (torch.int64, torch.float64, torch.float16)}[op.dtype]
    return padded_bytes(op.block_shape, dtype) * op.buffer_count
