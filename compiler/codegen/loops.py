"""How each loop of a kernel runs: the launch grid's order (`loop_orders`), each inner loop's strategy
(unroll, fori_loop or emit_pipeline, and when a request for one becomes another), and what the plan and the
hovers say about loops whose bounds are computed on the device. Decided from the IR and the config alone:
the call plan (plan_builder.py), the emitters and the config space (compiler/codegen/space.py) all ask here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir.tile_ir import GridLoop, InnerLoop, KernelIR, Load, Node, Store, TileDim, walk
from ..support.diagnostics import UserError

if TYPE_CHECKING:
    from .dma import DmaAccess


def multi_dim_tile_loops(ir: KernelIR) -> list[GridLoop | InnerLoop]:
    """hl.tile loops over several dims, in program order: what Helion's `loop_orders` entries refer to."""
    loops = [n for n in walk(ir.host) if isinstance(n, GridLoop | InnerLoop)]
    return [lp for lp in loops if len(lp.dims) > 1 and lp.dims[0].api == "tile"]


def grid_order(ir: KernelIR, grid: GridLoop, loop_orders: object) -> list[int]:
    """The permutation `loop_orders` gives this grid loop (identity when it gives none)."""
    identity = list(range(len(grid.dims)))
    if not isinstance(loop_orders, list | tuple):
        return identity
    loops = multi_dim_tile_loops(ir)
    if grid not in loops:
        return identity
    i = loops.index(grid)
    if i >= len(loop_orders):
        return identity
    order = loop_orders[i]
    if not isinstance(order, list | tuple) or sorted(order) != identity:
        raise UserError("HPL109", f"loop_orders[{i}] must be a permutation of {identity}, got {order!r}",
                        grid.header_range)
    return list(order)


def loop_strategy(config_loop_type: object, loop: InnerLoop) -> str:
    """How an inner loop runs. A pipeline streams the blocks of its own tiles, so a loop with loops nested in it
    runs as a fori_loop when emit_pipeline is asked for: its nested loops are the pipelines."""
    if isinstance(config_loop_type, list | tuple):
        value = config_loop_type[loop.index] if loop.index < len(config_loop_type) else "unroll"
    else:
        value = config_loop_type or "unroll"
    if value == "emit_pipeline" and not pipelinable(loop):
        return "fori_loop"
    if value in ("unroll", "emit_pipeline") and any(d.dynamic for d in loop.dims):
        return "fori_loop"  # its trip count is known only on the device (the plan and the loop's hover say so)
    return str(value)


def shortest_indexed_dim(nodes: list[Node], d: TileDim) -> int | None:
    """The shortest array dim the device-bounded tile `d` indexes (None when it indexes none): its windows are
    clamped inside it, and its range can be no longer."""
    sizes = []
    for n in walk(nodes):
        if isinstance(n, Load | Store):
            dims = [it for it in n.index if it[0] != "newaxis"]
            sizes += [n.tensor.value.shape[i] for i, it in enumerate(dims) if it[0] == "tile" and it[1] == d]
    return min(sizes) if sizes else None


def device_loop_note(loop: InnerLoop, requested: object, grid_body: list[Node]) -> str:
    """What the plan and the loop's hover say about a loop whose bounds are computed on the device."""
    dims = [d for d in loop.dims if d.dynamic]
    if not dims:
        return ""
    spans = [shortest_indexed_dim(grid_body, d) for d in dims]
    most = ", ".join(f"{s}" for s in spans if s is not None)
    note = ("bounds computed on the device: a `fori_loop` over cdiv(end - begin, block) steps, known only when it "
            "runs; each step reads a block-long window kept inside the arrays and masks positions outside its range"
            + (f" (the range fits in {most} positions)" if most else ""))
    for d in dims:
        if d.jagged:
            lanes = ", ".join(f"`{t.name}`" for t in d.lane_dims)
            note += (f"; `{d.name}` is jagged: it runs to the longest lane of {lanes} and each lane's positions past "
                     "its own end are masked")
    if requested in ("unroll", "emit_pipeline"):
        note += f"; `{requested}` was asked for and needs a trip count known at compile time, so it runs as a fori_loop"
    return note


def _requested(config_loop_type: object, loop: InnerLoop) -> object:
    if isinstance(config_loop_type, list | tuple):
        return config_loop_type[loop.index] if loop.index < len(config_loop_type) else "unroll"
    return config_loop_type or "unroll"


def pipelinable(loop: InnerLoop) -> bool:
    """Can the loop be an emit_pipeline? Only a loop with no loop nested in it."""
    return not any(isinstance(n, InnerLoop) for n in walk(loop.body))


def dma_loop_type(ir: KernelIR, loop_type: object, dma: dict[int, DmaAccess]) -> object:
    """`loop_type` with the loops that copy rows by DMA run as fori_loop where emit_pipeline was asked (their
    copies need the loop's position, which a pipeline body does not see)."""
    loops = {id(d.loop) for d in dma.values() if d.loop is not None}
    if not any(loop_strategy(loop_type, lp) == "emit_pipeline" for lp in ir.inner_loops if id(lp) in loops):
        return loop_type
    return [("fori_loop" if id(lp) in loops and _requested(loop_type, lp) == "emit_pipeline" else
             _requested(loop_type, lp)) for lp in ir.inner_loops]


def loop_note(loop: InnerLoop, loop_type: object, grid_body: list[Node]) -> str:
    """What the plan and the loop's hover say about how it runs, when that is not what was asked."""
    note = device_loop_note(loop, _requested(loop_type, loop), grid_body)
    if loop_strategy(loop_type, loop) == "fori_loop" and _requested(loop_type, loop) == "emit_pipeline" and not any(
            d.dynamic for d in loop.dims):
        note = ("it copies gathered rows by DMA, which needs the loop's position: `emit_pipeline` was asked for "
                "and it runs as a fori_loop")
    return note
