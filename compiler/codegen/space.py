"""Block-size legality, default configs and the config space of a kernel for given shapes.

TPU rules (Mosaic): of a block's last two dims, the last must be a multiple of 128 and the second-minor a
multiple of 8, unless the block spans the whole dimension; a rank-1 block must span the array, be a multiple
of 1024, or be a power of two of at least 128 * (4 / itemsize) of that 1-D array's dtype — except that a block
dividing a small 1-D tensor reads it through its rows view (frontend/row_views.py). A block size that tiles several tensors must
satisfy every rule it meets. A block need not divide its loop's extent: the last block is partial and masked
(compiler/frontend/masks.py). Only a sub-tile's block must divide its grid tile's block, which holds the sub-tiles.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..frontend.row_views import ROWS_MIN, fits_as_rows, rank1_legal
from ..ir.config import LOOP_TYPES, Config
from ..ir.tile_ir import GridLoop, InnerLoop, KernelIR, Load, Op, Store, Value, tensor_params, viewed, walk
from ..support.diagnostics import CompileError, Diagnostic, Range, error, hint, warning
from .loops import multi_dim_tile_loops, pipelinable

LANE, SUBLANE, LEADING, RANK1 = "lane", "sublane", "leading", "rank1"
_MIN = {LANE: 128, SUBLANE: 8, LEADING: 1}


@dataclass(frozen=True)
class BlockUse:
    """What one config block size tiles: its role decides which values are legal."""

    index: int
    extent: int
    roles: frozenset[str]  # lane | sublane | leading | rank1, one per kind of dim it tiles
    tensors: tuple[str, ...]
    inner: bool  # tiles an inner (non-grid) loop
    range: Range
    itemsize: int = 4  # smallest itemsize among the tensors it tiles
    divides: bool = False  # must divide `extent` (a sub-tile inside its grid tile's block)
    rows: bool = False  # a block whose 1-D tensors are small: a short block reads their rows views
    dynamic: bool = False  # tiles a loop whose range is computed on the device (jagged rows)
    rank1_itemsize: int = 4  # smallest itemsize among the 1-D tensors it tiles (the rank-1 rule is per array)

    @property
    def role(self) -> str:
        """The strictest role, for messages and defaults."""
        for r in (RANK1, LANE, SUBLANE):
            if r in self.roles:
                return r
        return LEADING

    def minimum(self) -> int:
        """Smallest legal block below the full extent."""
        lo = max((_MIN.get(r, 1) for r in self.roles), default=1)
        if RANK1 in self.roles:
            lo = max(lo, ROWS_MIN if self.rows else 128 * max(1, 4 // self.rank1_itemsize))
        return lo


def block_uses(ir: KernelIR, ranges: list[Range], extents: list[int]) -> list[BlockUse]:
    inner_blocks = {d.block_index for lp in ir.inner_loops for d in lp.dims if d.block_index is not None}
    sub_blocks = {d.block_index for lp in ir.inner_loops for d in lp.dims if d.parent is not None}
    device_blocks = {d.block_index for lp in ir.inner_loops for d in lp.dims if d.dynamic}
    loops = [d for n in ir.host if isinstance(n, GridLoop) for d in n.dims] + [d for lp in ir.inner_loops for d in lp.dims]
    row_blocks = {d.block_index for d in loops if d.api == "tile" and not d.dynamic and d.parent is None and not d.begin}
    uses = []
    for i, dims in enumerate(ir.block_size_dims):
        extent = extents[i]
        if i in device_blocks and dims:  # a device-bounded range fits in the shortest dim it indexes
            extent = min(tensor.value.shape[dim] for tensor, dim in dims)
        roles, names, itemsize, rank1_itemsize = set(), [], 4, 4
        for tensor, dim in dims:
            nd = len(tensor.value.shape)
            roles.add(RANK1 if nd == 1 else LANE if dim == nd - 1 else SUBLANE if dim == nd - 2 else LEADING)
            if tensor.name not in names:
                names.append(tensor.name)
            itemsize = min(itemsize, tensor.value.dtype.itemsize)
            if nd == 1:
                rank1_itemsize = min(rank1_itemsize, tensor.value.dtype.itemsize)
        flat = [t for t, _ in dims if len(t.value.shape) == 1]
        rows = i in row_blocks and bool(flat) and all(
            t.value.shape[0] == extent and fits_as_rows(extent, t.value.dtype.itemsize) for t in flat)
        uses.append(BlockUse(i, extent, frozenset(roles or {LEADING}), tuple(names), i in inner_blocks,
                             ranges[i], itemsize, i in sub_blocks, rows, i in device_blocks, rank1_itemsize))
    return uses


def legal(use: BlockUse, value: int) -> bool:
    if value >= use.extent:
        return True
    if use.divides and use.extent % value:
        return False
    if value < 1:
        return False
    if LANE in use.roles and value % 128:
        return False
    if SUBLANE in use.roles and value % 8:
        return False
    if RANK1 in use.roles:
        if use.rows and value % ROWS_MIN == 0 and use.extent % value == 0:  # through the rows view (row_views.py)
            return True
        return rank1_legal(use.extent, value, use.rank1_itemsize)
    return True


def candidates(use: BlockUse) -> list[int]:
    """Legal block sizes worth trying: powers of two in range plus the full extent."""
    out = []
    v = use.minimum()
    while v < use.extent:
        if legal(use, v):
            out.append(v)
        v *= 2
    out.append(use.extent)
    return out


def default_block(use: BlockUse, cap: int | None = None) -> int:
    """The block a kernel gets when its config does not give one: the largest legal size up to a target for the
    use's role, and up to `cap` (set when the defaults overflow VMEM) — never below the smallest legal size."""
    target = {RANK1: 1024, LANE: 512, SUBLANE: 256, LEADING: 1}[use.role]
    if not use.tensors or (use.dynamic and use.role == LEADING):
        # rows reached through positions (`t.index` gathers/scatters) or a leading dim walked by a range computed
        # on the device (jagged sequences): one row per step would make a step per row; take rows like a sublane
        target = 128
    if cap is not None:
        target = min(target, cap)
    ok = [c for c in candidates(use) if c <= max(target, 1)]
    return ok[-1] if ok else candidates(use)[0]


def nearest_legal(use: BlockUse, value: int) -> int:
    return min(candidates(use), key=lambda c: (abs(math.log2(max(c, 1)) - math.log2(max(value, 1))), c))


def check_blocks(uses: list[BlockUse], values: list[int], given: bool) -> list[Diagnostic]:
    diags = []
    for use, value in zip(uses, values, strict=False):
        if legal(use, value):
            rows = 8 * max(1, 4 // use.itemsize)
            if use.role == LANE and value < 128 and use.extent >= 128:
                diags.append(hint("HPL500", f"block_sizes[{use.index}]={value} fills {value} of 128 lanes; "
                                  "use a multiple of 128", use.range))
            elif use.role == SUBLANE and value < rows and use.extent >= rows:
                diags.append(hint("HPL502", f"block_sizes[{use.index}]={value} is below the {rows}-row packed tile "
                                  f"of {', '.join(use.tensors)}", use.range))
            continue
        best = nearest_legal(use, value)
        what = {LANE: "the lane (last) dim", SUBLANE: "the sublane (second-to-last) dim", LEADING: "a dim",
                RANK1: "the only dim of a 1-D block"}[use.role]
        if use.divides and use.extent % value:
            reason = f"a sub-tile's block must divide its grid tile's block {use.extent}"
            code = "HPL201"
        else:
            rule = {LANE: "a multiple of 128", SUBLANE: "a multiple of 8",
                    RANK1: f"a multiple of 1024 or a power of two >= {use.minimum()}"}.get(use.role, "positive")
            reason = f"must be {rule} or the full {use.extent}"
            code = "HPL200"
        msg = (f"block_sizes[{use.index}]={value} tiles {what} of {', '.join(use.tensors) or 'the loop'} "
               f"(size {use.extent}): {reason}; try {best}")
        diags.append(error(code, msg, use.range, data={"block_index": use.index, "suggested": best,
                                                       "from_decorator": given}))
    return diags


def raise_to_legal(uses: list[BlockUse], values: list[int], ir: KernelIR) -> dict[int, int]:
    """Illegal block sizes that can be raised to the next legal size without changing what the kernel computes,
    as Helion's Pallas backend does: index -> raised size. A block the kernel observes (tile.block_size, .id,
    .count), one that must divide a grid tile, one whose inner loop carries values (its trip count can
    change the result) and one whose loop scatters into a tensor it also reads (a later block reads what an
    earlier one wrote) keep their error. The caller re-traces to check that no tensor shape moves."""
    carried = {d.block_index for lp in ir.inner_loops if lp.carried and not _folds(lp) for d in lp.dims}
    loops = [n for n in walk(ir.host) if isinstance(n, GridLoop | InnerLoop)]
    carried |= {d.block_index for lp in loops if _reads_what_it_scatters(lp.body) for d in lp.dims}
    out = {}
    for use, value in zip(uses, values, strict=False):
        if legal(use, value) or use.divides or use.index in ir.observed_blocks or use.index in carried:
            continue
        up = [c for c in candidates(use) if c >= value]
        if up:
            out[use.index] = up[0]
    return out


_FOLDS = {"add", "maximum", "minimum", "mul", "dot"}


def _reads_what_it_scatters(body: list) -> bool:
    nodes = list(walk(body))
    scattered = {viewed(n.tensor.root.value).id for n in nodes
                 if isinstance(n, Store) and any(it[0] == "gather" for it in n.index)}
    return any(isinstance(n, Load) and viewed(n.tensor.root.value).id in scattered for n in nodes)


def _folds(loop: InnerLoop) -> bool:
    """Is every carried value a fold of per-iteration terms (`acc = acc + f(block)`, `m = max(m, ...)`,
    `acc = hl.dot(a, b, acc=acc)`) that do not read any carried value? Then the trip count, hence the block
    size, does not change the result (up to rounding)."""
    phis = {c.phi.id for c in loop.carried}
    inside = {id(n) for n in walk(loop.body)}
    seen: dict[int, bool] = {}

    def reads_carry(v: Any) -> bool:
        if not isinstance(v, Value):
            return False
        if v.id in phis:
            return True
        if v.id not in seen:
            seen[v.id] = False
            p = v.producer
            seen[v.id] = isinstance(p, Op) and id(p) in inside and any(reads_carry(a) for a in p.args)
        return seen[v.id]

    def unwrap(v: Any) -> Any:  # partial-tile masks and casts keep a fold a fold
        while isinstance(v, Value) and isinstance(v.producer, Op) and v.producer.kind in ("mask", "to"):
            v = v.producer.args[0]
        return v

    for c in loop.carried:
        p = unwrap(c.next).producer if isinstance(unwrap(c.next), Value) else None
        if not isinstance(p, Op) or p.kind not in _FOLDS:
            return False
        own = [a for a in p.args if unwrap(a) is c.phi]
        rest = [a for a in p.args if unwrap(a) is not c.phi]
        if len(own) != 1 or (p.kind == "dot" and p.args[-1] is not own[0]) or any(reads_carry(a) for a in rest):
            return False
    return True


def raise_blocks(uses: list[BlockUse], values: list[int], ir: KernelIR, given: bool, errors: list[Diagnostic],
                 retrace: Callable[[list[int]], tuple[KernelIR, list[BlockUse]]]) -> tuple:
    """Illegal block sizes raised to legal ones, when that keeps the kernel's meaning and every tensor's shape:
    (ir, uses, block sizes, diagnostics with one HPL205 warning per raised size). Raises CompileError(errors)
    when some cannot be."""
    raised = raise_to_legal(uses, values, ir)
    if raised:
        blocks = [raised.get(i, v) for i, v in enumerate(values)]
        ir2, uses2 = retrace(blocks)
        if [t.value.shape for t in ir2.tensors if not t.rows] == [t.value.shape for t in ir.tensors if not t.rows]:
            rest = check_blocks(uses2, blocks, given)
            if not any(d.is_error for d in rest):
                return ir2, uses2, blocks, raised_warnings(uses, values, raised, given) + rest
    raise CompileError(errors)


def raised_warnings(uses: list[BlockUse], values: list[int], raised: dict[int, int], given: bool) -> list[Diagnostic]:
    """One warning per raised block size, with the same quick fix data as the error it replaces."""
    diags = []
    for use in uses:
        if use.index in raised:
            new = raised[use.index]
            msg = (f"block_sizes[{use.index}]={values[use.index]} is not TPU-legal for {', '.join(use.tensors) or 'the loop'} "
                   f"(size {use.extent}); compiled with {new}, the next legal size")
            diags.append(warning("HPL205", msg, use.range, data={"block_index": use.index, "suggested": new,
                                                                  "from_decorator": given}))
    return diags


@dataclass
class ConfigSpace:
    """The discrete config space: named dimensions with finite candidate values.

    `dimensions` lists (name, values); `to_config(point)` turns one choice per dimension into a Config.
    """

    dimensions: list[tuple[str, list[Any]]]
    base: Config = field(default_factory=Config)
    n_blocks: int = 0
    n_loops: int = 0  # inner loops: one `pallas_loop_type` dimension when there are any
    n_buffers: int = 0  # tensor arguments (pallas_load_buffer_count entries), 0 when none is worth tuning
    n_orders: int = 0  # multi-dim hl.tile loops (loop_orders entries)

    @property
    def size(self) -> int:
        return math.prod(len(v) for _, v in self.dimensions) if self.dimensions else 1

    def to_config(self, point: dict[str, Any]) -> Config:
        values = dict(self.base)
        if self.n_blocks:
            values["block_sizes"] = [point[f"block_sizes[{i}]"] for i in range(self.n_blocks)]
        if self.n_loops:
            values["pallas_loop_type"] = point["pallas_loop_type"]
        if self.n_orders:
            orders = [list(point.get(f"loop_orders[{i}]", ())) for i in range(self.n_orders)]
            orders = [o or list(range(n)) for o, n in zip(orders, self._order_sizes(), strict=True)]
            if any(o != sorted(o) for o in orders):
                values["loop_orders"] = orders
            else:
                values.pop("loop_orders", None)
        if self.n_buffers:
            bufs = [point[f"pallas_load_buffer_count[{i}]"] for i in range(self.n_buffers)]
            if any(b != 2 for b in bufs):
                values["pallas_load_buffer_count"] = bufs
            else:
                values.pop("pallas_load_buffer_count", None)
        return Config(values)

    def _order_sizes(self) -> list[int]:
        sizes = {int(n.split("[")[1][:-1]): len(v[0]) for n, v in self.dimensions if n.startswith("loop_orders")}
        return [sizes.get(i, 0) for i in range(self.n_orders)]

    def point_of(self, config: Config) -> dict[str, Any]:
        point = {}
        orders = list(config.get("loop_orders", []))
        blocks = list(config.get("block_sizes", []))
        loops = config.get("pallas_loop_type", "unroll")
        bufs = config.get("pallas_load_buffer_count", 2)
        for name, values in self.dimensions:
            if name == "pallas_loop_type":  # one string for every inner loop, as upstream Helion takes it
                point[name] = loops if isinstance(loops, str) else None
                continue
            key, idx = name.split("[")
            i = int(idx[:-1])
            if key == "block_sizes":
                point[name] = blocks[i] if i < len(blocks) else values[0]
            elif key == "loop_orders":
                point[name] = tuple(orders[i]) if i < len(orders) else values[0]
            else:
                point[name] = bufs if isinstance(bufs, int) else (bufs[i] if i < len(bufs) else 2)
        return point

    def __iter__(self) -> Iterator[Config]:
        names = [n for n, _ in self.dimensions]
        for combo in itertools.product(*[v for _, v in self.dimensions]):
            yield self.to_config(dict(zip(names, combo, strict=True)))


def build_space(ir: KernelIR, uses: list[BlockUse]) -> ConfigSpace:
    """Upstream Helion's Config takes one `pallas_loop_type` string for all inner loops and one
    `pallas_load_buffer_count` entry per tensor argument: the space has the same form, so every config it
    yields can be written into a file that upstream Helion runs."""
    dims: list[tuple[str, list[Any]]] = [(f"block_sizes[{u.index}]", candidates(u)) for u in uses]
    n_loops = len(ir.inner_loops)
    if n_loops:  # emit_pipeline on a loop that cannot pipeline runs it as a fori_loop (loop_strategy)
        pipelines = any(pipelinable(lp) for lp in ir.inner_loops)
        dims.append(("pallas_loop_type", list(LOOP_TYPES) if pipelines else ["unroll", "fori_loop"]))
    # single-buffering is worth trying for arguments an inner loop reads (resident K/V) — others stay at 2
    slots = {ir.args[name].id: i for i, name in enumerate(tensor_params(ir))}
    inner_loads = {id(n) for lp in ir.inner_loops for n in walk(lp.body)}
    buffered = {slots.get(viewed(ld.tensor.root.value).id) for ld in ir.loads if id(ld) in inner_loads} - {None}
    n_buffers = len(slots) if buffered else 0
    for i in range(n_buffers):
        dims.append((f"pallas_load_buffer_count[{i}]", [2, 1] if i in buffered else [2]))
    # the launch-grid order matters when some input block stays put along a grid axis (its copy is skipped
    # while consecutive steps keep it); other multi-dim loops keep their written order
    tile_loops = multi_dim_tile_loops(ir)
    for i, lp in enumerate(tile_loops):
        perms = [tuple(range(len(lp.dims)))]
        if isinstance(lp, GridLoop) and _order_matters(ir, lp):
            perms = [tuple(p) for p in itertools.permutations(range(len(lp.dims)))]
        dims.append((f"loop_orders[{i}]", perms))
    return ConfigSpace(dims, Config(), len(uses), n_loops, n_buffers, len(tile_loops))


def _order_matters(ir: KernelIR, grid: GridLoop) -> bool:
    own = {d.loop_id for d in grid.dims}
    for n in walk(grid.body):
        if isinstance(n, Load):
            used = {it[1].axis for it in n.index if it[0] in ("tile", "grid", "id") and it[1].loop_id in own}
            if used and len(used) < len(grid.dims):
                return True
    return False


def loops_of(ir: KernelIR) -> list[InnerLoop]:
    return list(ir.inner_loops)
