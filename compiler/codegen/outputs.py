"""Tensors a pallas_call writes: which it aliases, which blocks need their old contents, and the read/write
patterns no generated code can order correctly (those are diagnosed, never compiled into a wrong answer).

Helion's semantics are sequential: grid step s sees every write of the steps before it. The TPU pipeline
facts the generated code relies on to keep that promise:
- an output block stays in VMEM from the first grid step that maps to it until its block index changes,
  and is then written back whole (unwritten elements included);
- an input block is fetched only when its block index changes, and the next step's blocks are prefetched
  while the current step runs.
So a tensor that is read and written (`x[row, :] = x[row, :] + c`, `out[tm, tn] += a @ b` with K on the
launch grid) is aliased (`input_output_aliases`), its old block is copied into the output block once, at
the first step of each run of steps visiting that block (`pl.when`), and every later read in the run reads
the output block. A block revisited after another block came in between would be read back from HBM
while its write-back may still be in flight (and Pallas rejects a launch-grid output block revisited that
way even when it is only written): that is diagnosed (HPL204), as is a tensor read through one
block layout while it is written through another in the same loop. A write-only output whose stores do
not cover every element of its block is aliased and copied in too, so the unwritten elements keep their
values instead of VMEM garbage; a write-only output whose stores cover the block leaves its old
contents in HBM (`memory_space=pl.ANY`), aliased only so blocks the grid never visits keep theirs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir.tile_ir import GridLoop, HostTensor, KernelIR, Load, Node, Op, Store, TileDim, Value, viewed, walk
from ..support.diagnostics import UserError

if TYPE_CHECKING:
    from .plan_builder import OperandLayout


def written_before(ir: KernelIR, grid: GridLoop) -> set[int]:
    """Root tensors (by value id) that grid loops before `grid` store into."""
    out: set[int] = set()
    for n in ir.host:
        if n is grid:
            break
        if isinstance(n, GridLoop):
            out.update(s.tensor.root.value.id for s in walk(n.body) if isinstance(s, Store))
    return out


def has_contents(root: HostTensor, written: set[int]) -> bool:
    """Does the tensor hold values the kernel must keep (an argument, an initialised or copied buffer, or
    one an earlier grid loop wrote)?"""
    return root.origin == "arg" or root.init not in (None, "empty") or root.value.id in written


def resolve(ir: KernelIR, grid: GridLoop, ops: list[OperandLayout], by_node: dict[int, OperandLayout],
            launch: list[TileDim], check_revisits: bool = True) -> list[OperandLayout]:
    """Decide aliasing and copy-in for every written tensor of one call; merge accesses that share one block;
    raise HPL204 for orders the TPU pipeline cannot keep. Returns the operands left after merging."""
    written = written_before(ir, grid)
    for o in ops:
        if o.kind == "output" and has_contents(o.tensor.root, written):
            o.kind = "inout"
    ops = _merge_shared_blocks(ops, by_node)
    _check_conflicts(ops, by_node, grid)
    nodes = [n for n in walk(grid.body) if isinstance(n, Load | Store)]
    for o in ops:
        if o.kind != "inout" or o.memory == "dma":  # rows copied by DMA read and write HBM directly
            continue
        mine = [n for n in nodes if by_node.get(id(n)) is o]
        o.reads_old = any(isinstance(n, Load) or n.accumulate for n in mine) or not any(
            isinstance(n, Store) and _covers(n, o, grid.dims[0].loop_id) for n in mine)
    for o in ops:
        if check_revisits and o.kind != "input" and o.memory != "dma" and (o.reads_old or o.memory != "hbm"):
            _check_revisits(o, launch, by_node, nodes)
    return ops


def first_visit(axes: list[int], steps: list[int], names: list[str]) -> str | None:
    """Condition (text) true at the first step of each run of steps that map to one block, for a block index
    depending on loop positions `axes` of a loop nest with `steps` per position (lexicographic order, last
    position fastest); None when every step starts a new run."""
    used = [a for a in axes if steps[a] > 1]
    last = max(used, default=-1)
    later = [names[a] for a in range(last + 1, len(steps)) if steps[a] > 1]
    if not later:
        return None
    return " & ".join(f"({n} == 0)" for n in later) if len(later) > 1 else f"{later[0]} == 0"


def inner_axes_used(o: OperandLayout) -> list[int]:
    """Positions among its streaming loop's dims that an operand's inner block index depends on."""
    loop = o.loop
    if loop is None:
        return []
    lid = loop.dims[0].loop_id
    return sorted({it[1].axis for it in o.items if it[0] in ("tile", "grid", "id") and it[1].loop_id == lid})


def _merge_shared_blocks(ops: list[OperandLayout], by_node: dict[int, OperandLayout]) -> list[OperandLayout]:
    """Accesses of a written tensor through different index patterns that map to the same VMEM block (e.g.
    `out[0]` and `out[1]` of a whole-array block, or `out[tm, :]` and `out[tm, tn]` in loops over a resident
    row) become one operand, so reads see earlier writes and the block is written back once."""
    written = {o.tensor.value.id for o in ops if o.kind in ("output", "inout")}
    kept: list[OperandLayout] = []
    for o in ops:
        target = None
        if o.tensor.value.id in written and o.memory in ("vmem_block", "resident"):
            target = next((k for k in kept if k.tensor is o.tensor and k.memory in ("vmem_block", "resident")
                           and k.block_shape == o.block_shape and k.index_map == o.index_map), None)
        if target is None:
            kept.append(o)
            continue
        target.kind = target.kind if target.kind == o.kind else "inout"
        target.ranges.extend(o.ranges)
        if target.arg_slot is None:
            target.arg_slot = o.arg_slot
        if target.loop is None or (o.loop is not None and o.loop.depth < target.loop.depth):
            target.loop = o.loop
        target.inner_axes = tuple(sorted(set(target.inner_axes) | set(o.inner_axes)))
        for key, value in list(by_node.items()):
            if value is o:
                by_node[key] = target
    return kept


class BlockConflict(UserError):
    """A written tensor accessed through two block layouts in one call; `root` (a value id, see `viewed`) names
    it, so the call can be placed again with that tensor's whole array as one resident block."""

    def __init__(self, code: str, message: str, rng, root: int):
        super().__init__(code, message, rng)
        self.root = root


def _check_conflicts(ops: list[OperandLayout], by_node: dict[int, OperandLayout], grid: GridLoop) -> None:
    """A tensor written in this loop may be accessed through one block layout only."""
    by_root: dict[int, list[OperandLayout]] = {}
    for o in ops:  # grouped by the tensor they store through or look at (views included)
        by_root.setdefault(viewed(o.tensor.root.value).id, []).append(o)
    for root, group in by_root.items():
        writers = [o for o in group if o.kind in ("output", "inout")]
        if not writers or len(group) == 1 or _reads_first_on_own_rows(group, writers, by_node, grid):
            continue
        nodes = {id(o): [n for n in walk(grid.body) if isinstance(n, Load | Store) and by_node.get(id(n)) is o]
                 for o in group}
        w = writers[0]
        store = next(n for n in nodes[id(w)] if isinstance(n, Store))
        other = next(o for o in group if o is not w)
        first = nodes[id(other)][0]
        name = w.tensor.root.name
        if len(writers) > 1 and all(o.kind == "output" for o in group):
            raise BlockConflict("HPL202", f"`{name}` is stored through two different blocks in one loop (line "
                                          f"{store.range.start.line + 1} and here); Pallas needs one output block per "
                                          "tensor", first.range, root)
        raise BlockConflict(
            "HPL204",
            f"`{name}` is written in this loop (line {store.range.start.line + 1}) and accessed here through a "
            f"different {'view or ' if other.tensor is not w.tensor else ''}index pattern: a grid step would not "
            f"see the writes of the steps before it; index `{name}` the same way in both places (or read it in "
            "a separate loop)",
            first.range,
            root,
        )


def _reads_first_on_own_rows(group: list[OperandLayout], writers: list[OperandLayout],
                             by_node: dict[int, OperandLayout], grid: GridLoop) -> bool:
    """May a tensor written through one operand also be read through others (reshaped views of it: vLLM's
    per-group quantization reads `residual[tile_m, tile_n]` and writes `residual.view(T, H / G, G)` blocks)?
    Yes when every read through the others comes before the first write in the step, and each step touches
    only its own rows: every launch-grid dim that takes more than one step indexes, as its own tile, one
    leading dim that all the views share with the tensor. Then no step reads what another step wrote, and
    within a step the reads see the values from before its writes, which is what they are."""
    if len(writers) != 1 or any(o.memory == "dma" for o in group):
        return False
    w = writers[0]
    if any(o.kind != "input" for o in group if o is not w):
        return False
    order = [n for n in walk(grid.body) if isinstance(n, Load | Store) and by_node.get(id(n)) in group]
    first_write = next(i for i, n in enumerate(order) if isinstance(n, Store))
    if any(by_node.get(id(n)) is not w for n in order[first_write:]):
        return False
    base = _reshaped_from(w.tensor.value)
    for o in group:
        if _reshaped_from(o.tensor.value) is not base:
            return False
    for d in grid.dims:
        if d.steps == 1:
            continue
        for o in group:
            at = _tile_dim(o.items, d)
            shape, root = tuple(o.tensor.value.shape), tuple(base.shape)
            if at is None or shape[: at + 1] != root[: at + 1]:
                return False
    return True


def _reshaped_from(v: Value) -> Value:
    """The tensor a chain of reshapes of `v` starts from."""
    while isinstance(v.producer, Op) and v.producer.kind == "reshape" and isinstance(v.producer.args[0], Value):
        v = v.producer.args[0]
    return v


def _tile_dim(items: tuple[tuple, ...], d: TileDim) -> int | None:
    """The tensor dim that `items` index by tile `d` (as a whole block), if any."""
    dim = 0
    for it in items:
        if it[0] == "newaxis":
            continue
        if (it[0] == "tile" or (it[0] == "id" and d.block_size == 1 and not d.begin)) and it[1] == d:
            return dim  # a one-row tile's block number is its row
        dim += 1
    return None


def _check_revisits(o: OperandLayout, launch: list[TileDim], by_node: dict[int, OperandLayout],
                    nodes: list[Node]) -> None:
    """An output block must be visited by consecutive steps only (see the module docstring); a block streamed
    by an inner pipeline only when it is read back."""
    if o.memory == "hbm":
        steps = [d.steps for d in o.loop.dims]
        used = inner_axes_used(o)
        names = [d.name for d in o.loop.dims]
        where = "inner loop"
    else:
        steps = [d.steps for d in launch]
        used = list(o.grid_axes)
        names = [d.name for d in launch]
        where = "launch grid"
    last = max((a for a in used if steps[a] > 1), default=-1)
    early = [names[a] for a in range(last) if a not in used and steps[a] > 1]
    if not early:
        return
    rng = next(n.range for n in nodes if by_node.get(id(n)) is o and isinstance(n, Load | Store))
    hint = ("list them last in hl.tile([...]) or set loop_orders" if where == "launch grid"
            else "list them last in that hl.tile([...])")
    why = ("a step would read the block back before its write-back lands" if o.reads_old
           else "Pallas writes an output block back once per run of consecutive steps on it")
    raise UserError(
        "HPL204",
        f"`{o.tensor.name}` is {'read and ' if o.reads_old else ''}written at one block over steps of the {where} "
        f"that are not consecutive (its block does not depend on {', '.join(f'`{n}`' for n in early)}, which runs "
        f"outside `{names[last]}`): {why}; {hint}",
        rng,
    )


def _covers(store: Store, o: OperandLayout, launch_id: int) -> bool:
    """Does one execution of `store` (all iterations of the inner loops it is in) write every element of the
    operand's block?"""
    if store.pred is not None:
        return False  # under `if` on a device value: where the branch is not taken the old values stay
    shape = o.tensor.value.shape
    d = 0
    for it in store.index:
        kind = it[0]
        if kind == "newaxis":
            continue
        if o.block_shape[d] is not None and not _covers_dim(it, shape[d], o, launch_id, o.block_shape[d]):
            return False
        d += 1
    return True


def spills(td: TileDim, size: int) -> bool:
    """Would the padding of the tile's last block land on valid elements of an array dim of `size`? (The
    range ends inside the array: Pallas only drops what lies past the array's end.) Such a store keeps the old
    values there, so it reads them."""
    if td.dynamic:
        return True  # the window's positions outside [this step's first position, end) belong to others
    limit = td
    while limit.parent is not None:
        limit = limit.parent
    return td.partial and limit.extent < size


def _covers_dim(it: tuple, size: int, o: OperandLayout, launch_id: int, block: int) -> bool:
    kind = it[0]
    if kind == "full":
        return True
    if kind in ("int", "scalar"):
        return size == 1
    if kind == "window":  # placed as a block of its own (start a multiple of its size), or sliced from the dim
        return block == it[2]
    if kind == "gather":
        return False  # a scatter writes the positions its index names, and reads the rest of the block
    td: TileDim = it[1]
    if kind == "tile" and spills(td, size):
        return False
    if td.loop_id == launch_id:
        # a launch-grid tile is the block; a launch-grid index into a whole-dim block writes one row of it
        return kind == "tile"
    if o.memory == "hbm":
        return kind == "tile"  # one streamed block per inner step
    # resident: the block spans the dim; the inner loop must walk all of it
    if td.parent is not None:
        return True  # sub-tiles walk their launch-grid tile, which is the block along this dim
    if kind == "id":
        return td.steps == size
    return td.begin == 0 and td.extent >= size
