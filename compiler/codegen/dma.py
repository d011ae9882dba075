"""Gathers and scatters through explicit DMAs: rows copied between a tensor left in HBM and a small VMEM buffer.

A gather `table[idx, ...]` normally keeps the whole table in VMEM as one block and picks rows with a one-hot
matmul (emit_index.py). When the table's whole-array block would take more than a quarter of the chip's default
scoped VMEM (or the config asks for `pallas_indirect_access_mode="dma"`), the table stays in HBM
(`memory_space=pl.ANY`) and each position's row is copied by its own `pltpu.make_async_copy` into a VMEM buffer
of [positions, *row]; the VMEM report counts that buffer, not the table. A scatter copies rows the other way,
from a staging buffer.

DMA addresses are scalars: each position's index is evaluated on the scalar core (`ScalarIndex`) from the
int32 tensors it reads, which the call also gets whole in SMEM (`labels[tile_n] + tile_n.index * v` becomes
`labels_smem[row] + row * v` for each row of the tile). An index made of anything else keeps the one-hot path.

Order and pipelining (emit_dma.py): a gather from a tensor the call does not write is double-buffered across
the iterations of its innermost loop (or across launch-grid steps, which then run in order): the next
iteration's copies start before this one's are waited for. A tensor the call also writes is fetched where it
is read, and its rows are written back by copies that complete before the iteration ends, so the next
iteration reads them; rows a scatter names twice take the later position's values, as in torch.

Which copies the TPU accepts (libtpu for v7x): rows along a leading dim of any dtype, along the second-minor
dim of a 32-bit array (with the whole lane dim), and for a 1-D table the 128-lane aligned chunk holding each
element (picked from it afterwards); a 1-D view `x.view(-1)` of a contiguous 32-bit array reads those chunks
from `x` itself, so no flattened copy of it is made.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..frontend.masks import PAST_END
from ..frontend.values import NamedConst
from ..ir.chips import Chip
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
    Value,
    tensor_params,
    viewed,
)
from .work import padded_bytes

SMEM_INDEX_BYTES = 256 * 1024  # an index table read on the scalar core is copied whole into SMEM (1 MiB)
CHUNK = 128  # lanes copied per element of a 1-D (32-bit) gather: 512 bytes, the DMA word the TPU needs
_INFIX = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "mod": "%", "and": "&", "or": "|", "xor": "^",
          "lshift": "<<", "rshift": ">>", "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_INT_DTYPES = (torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)


class NotScalar(Exception):
    """The index cannot be evaluated one element at a time on the scalar core."""


@dataclass
class DmaAccess:
    """One gather, scatter or device-bounded window carried out by copies (see the module docstring)."""

    node: Load | Store
    kind: str  # "gather" | "scatter" | "window_load" | "window_store"
    index: Value | None  # the int tensor of positions (None for a window)
    src: HostTensor  # the tensor the copies address (for a gather from a 1-D view: the array it views)
    rest: tuple[tuple, ...]  # index items of `src`'s dims after the gathered one: ("full",) / ("int", c) / ...
    row_shape: tuple[int, ...]  # one position's copy as the buffer holds it
    chunk: bool  # a 1-D gather: each copy is the aligned CHUNK-lane run holding the element
    loop: InnerLoop | None  # the innermost loop around it (None: straight in the launch-grid step)
    prefetch: bool  # double-buffered across `loop`'s iterations (the grid's steps when loop is None)
    why: str  # for the access's hover
    tables: list[HostTensor] = field(default_factory=list)  # int32 tensors the index reads (SMEM copies)
    buffer: str = ""  # VMEM scratch names, set by plan_builder
    sem: str = ""
    tile: TileDim | None = None  # a window's device-bounded tile
    before: tuple[tuple, ...] = ()  # a window's index items of the dims before the tile's (squeezed positions)

    @property
    def positions(self) -> int:
        return 1 if self.index is None else max(1, math.prod(self.index.shape))

    @property
    def slots(self) -> int:
        return 2 if self.prefetch else 1

    def describe(self) -> str:
        """How the access is carried out, for its hover."""
        shape = "×".join(map(str, self.row_shape))
        if self.kind in ("window_load", "window_store"):
            where = (f"copied in from HBM by DMA, double-buffered across `{self.tile.name}`'s loop"
                     if self.kind == "window_load" else "copied out to HBM by DMA (only the rows inside the loop's "
                     "range), from a two-slot staging buffer whose copies land while the next step runs")
            return f"`{self.tile.name}`'s window [{shape}] {where}; the tensor stays in HBM because {self.why}"
        what = "the 128-lane chunk holding its element" if self.chunk else f"a row [{shape}]"
        if self.kind == "gather":
            step = "the launch grid's steps, which run in order" if self.loop is None else f"`{self.loop.dims[0].name}`"
            how = f"double-buffered across {step}" if self.prefetch else "fetched where it is read"
            return (f"dim 0: gathered by DMA, one copy per position ({self.positions} per step, each {what}) into "
                    f"a VMEM buffer, {how}; the tensor stays in HBM because {self.why}")
        return (f"dim 0: scattered by DMA, one copy per position ({self.positions} per step, each {what}) from a "
                f"VMEM staging buffer, a position given twice keeping the later value; the tensor stays in HBM "
                f"because {self.why}")

    @property
    def copy_shape(self) -> tuple[int, ...]:
        """What one execution copies: [*index shape, *row] (a window: its rows)."""
        return (tuple(self.index.shape) if self.index is not None else ()) + self.row_shape

    @property
    def buffer_shape(self) -> tuple[int, ...]:
        return ((self.slots,) if self.kind != "scatter" else ()) + self.copy_shape


def plan_dma(ir: KernelIR, grid: GridLoop, config: dict, chip: Chip) -> dict[int, DmaAccess]:
    """The accesses of one grid loop that copy rows by DMA, by id(node)."""
    mode = config.get("pallas_indirect_access_mode")
    accesses: list[tuple[Load | Store, list[InnerLoop]]] = []

    def visit(nodes: list[Node], loops: list[InnerLoop]) -> None:
        for n in nodes:
            if isinstance(n, InnerLoop):
                visit(n.body, loops + [n])
            elif isinstance(n, Load | Store):
                accesses.append((n, loops))

    visit(grid.body, [])
    written = {_root(n.tensor) for n, _ in accesses if isinstance(n, Store)}
    budget = chip.default_scoped_vmem_bytes // 4
    by_root: dict[int, list[tuple[Load | Store, list[InnerLoop]]]] = {}
    for n, loops in accesses:
        by_root.setdefault(_root(n.tensor), []).append((n, loops))
    out: dict[int, DmaAccess] = {}
    for root, group in by_root.items():
        out.update(_windows(group, root in written, budget, chip))
        gathers = [(n, loops) for n, loops in group if _gather_axis(n) is not None]
        if not gathers or mode == "one_hot":
            continue
        table = gathers[0][0].tensor.value
        big = padded_bytes(tuple(table.shape), table.dtype) > budget
        if mode != "dma" and not big:
            continue
        why = ("the config asks for pallas_indirect_access_mode='dma'" if mode == "dma" and not big else
               f"its whole-array block ({_mib(padded_bytes(tuple(table.shape), table.dtype))}) {_over(budget, chip)}")
        found = {}
        for n, loops in gathers:
            d = _access(ir, n, loops, root in written, why, grid, _load_buffers(ir, n, config))
            if d is not None:
                found[id(n)] = d
        if root in written and (len(found) != len(group) or _read_after_write(grid.body, root)):
            continue  # every access of a written tensor must go through the copies, in an order they keep
        out.update(found)
    return out


def _windows(group: list[tuple[Load | Store, list[InnerLoop]]], written: bool, budget: int,
             chip: Chip) -> dict[int, DmaAccess]:
    """Accesses of one tensor at a device-bounded tile's window (`q[tile_q, :, :]` in `hl.tile(start, end)`)
    whose whole-dim VMEM block would not fit the budget: the window is copied in (double-buffered across the
    tile's loop) or its rows inside the loop's range are copied out. A tensor both read and written this way
    keeps its resident block."""
    found: dict[int, DmaAccess] = {}
    for n, loops in group:
        items = [it for it in n.index if it[0] != "newaxis"]
        tiles = [i for i, it in enumerate(items) if it[0] == "tile" and it[1].dynamic]
        if len(tiles) != 1 or len(items) != len(n.index):
            continue
        d = _window(n, items, tiles[0], loops, budget, chip)
        if d is not None:
            found[id(n)] = d
    if not found:
        return {}
    kinds = {d.kind for d in found.values()}
    if written and (len(found) != len(group) or len(kinds) != 1 or kinds != {"window_store"}):
        return {}
    return found


def _window(n: Load | Store, items: list[tuple], at: int, loops: list[InnerLoop], budget: int,
            chip: Chip) -> DmaAccess | None:
    t = n.tensor
    shape, dtype = tuple(t.value.shape), t.value.dtype
    td: TileDim = items[at][1]
    if td.jagged or (isinstance(n, Store) and (n.accumulate or n.pred is not None)):
        return None
    if not (at < len(shape) - 2 or (at == len(shape) - 2 and dtype.itemsize == 4)):
        return None  # the TPU copies rows at any offset along a leading dim, or the sublane dim of 32-bit data
    if any(it[0] not in ("int", "grid") for it in items[:at]) or any(
            it[0] not in ("int", "grid", "full") or (it[0] != "full" and i >= len(shape) - 2)
            for i, it in enumerate(items[at + 1:], start=at + 1)):
        return None
    whole = padded_bytes(tuple(shape[at:]), dtype)
    if whole <= budget:
        return None
    loop = next((lp for lp in loops if any(d is td for d in lp.dims)), None)
    if loop is None or len(loop.dims) != 1:
        return None
    rest = tuple(it for it in items[at + 1:])
    row = (td.block_size, *(shape[i] for i, it in enumerate(items) if i > at and it[0] == "full"))
    why = f"its whole dim in VMEM ({_mib(whole)}) {_over(budget, chip)}"
    kind = "window_load" if isinstance(n, Load) else "window_store"
    return DmaAccess(n, kind, None, t, rest, row, False, loop, True, why, tile=td,
                     before=tuple(items[:at]))


def _load_buffers(ir: KernelIR, n: Load | Store, config: dict) -> object:
    """The config's pallas_load_buffer_count for the tensor argument a gather reads (one entry per tensor
    argument, as upstream Helion reads it)."""
    spec = config.get("pallas_load_buffer_count")
    if not isinstance(n, Load) or spec is None:
        return None
    if isinstance(spec, int):
        return spec
    root = viewed(n.tensor.root.value)
    i = next((i for i, p in enumerate(tensor_params(ir)) if ir.args[p] is root), None)
    return spec[i] if isinstance(spec, list | tuple) and i is not None and i < len(spec) else None


def _over(budget: int, chip: Chip) -> str:
    return f"would take more than {_mib(budget)}, a quarter of {chip.name}'s default scoped VMEM"


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 1024:.0f} KiB"


def _root(t: HostTensor) -> int:
    return viewed(t.root.value).id


def _gather_axis(n: Load | Store) -> int | None:
    """The position of the one tensor index among the access's dims, when there is exactly one."""
    dims = [it for it in n.index if it[0] != "newaxis"]
    found = [i for i, it in enumerate(dims) if it[0] == "gather"]
    return found[0] if len(found) == 1 else None


def _read_after_write(nodes: list[Node], root: int) -> bool:
    """Does a loop body (or the grid step) gather from the tensor after scattering into it? Its copies would
    race; such kernels keep the one-hot path."""
    stored = False
    for n in nodes:
        if isinstance(n, Store) and _root(n.tensor) == root:
            stored = True
        elif isinstance(n, Load) and _root(n.tensor) == root and stored:
            return True
        elif isinstance(n, InnerLoop) and _read_after_write(n.body, root):
            return True
    return False


def _access(ir: KernelIR, n: Load | Store, loops: list[InnerLoop], written: bool, why: str,
            grid: GridLoop, buffers: object) -> DmaAccess | None:
    """`buffers`: the config's pallas_load_buffer_count for the tensor it reads (1: no prefetch)."""
    items = [it for it in n.index if it[0] != "newaxis"]
    if items[0][0] != "gather" or [it[0] for it in n.index].index("gather") != 0:
        return None  # the positions must select along the first dim (the copies' rows)
    if isinstance(n, Store) and (n.accumulate or n.pred is not None):
        return None
    index: Value = items[0][1]
    if index.dtype not in _INT_DTYPES or not index.shape:
        return None
    form = _form(ir, n, items)
    if form is None:
        return None
    src, rest, row_shape, chunk = form
    if isinstance(n, Store) and (chunk or len(index.shape) != 1):
        return None  # a chunk written back would overwrite its neighbours; scatters take one index dim
    checker = ScalarIndex(lambda d: "0", lambda d: "0", lambda t: "t")
    try:
        checker.render(index, tuple(("0", a) for a in range(len(index.shape))))
    except NotScalar:
        return None
    written_here = {_root(s.tensor) for s in _walk(grid.body) if isinstance(s, Store)}
    for t in checker.tables.values():
        if _root(t) in written_here or math.prod(t.value.shape) * 4 > SMEM_INDEX_BYTES:
            return None
    loop = loops[-1] if loops else None
    prefetch = isinstance(n, Load) and not written and (loop is None or len(loop.dims) == 1) and buffers != 1
    kind = "gather" if isinstance(n, Load) else "scatter"
    return DmaAccess(n, kind, index, src, rest, row_shape, chunk, loop, prefetch, why, list(checker.tables.values()))


def _walk(nodes: list[Node]):
    for n in nodes:
        yield n
        if isinstance(n, InnerLoop):
            yield from _walk(n.body)


def _form(ir: KernelIR, n: Load | Store, items: list[tuple]) -> tuple | None:
    """(tensor the copies address, items of its other dims, one copy's shape, lane chunks?) or None when the
    TPU's DMA rules (module docstring) do not allow per-position copies of this access."""
    t = n.tensor
    shape, dtype = tuple(t.value.shape), t.value.dtype
    if len(shape) == 1:
        if dtype.itemsize != 4:
            return None
        root = _flat_view_root(ir, t)
        if root is not None:
            return root, (), (CHUNK,), True
        return (t, (), (CHUNK,), True) if shape[0] % CHUNK == 0 else None
    rest = []
    for d, it in enumerate(items[1:], start=1):
        tiled = d >= len(shape) - 2
        whole = it[0] == "full" or (it[0] == "tile" and it[1].begin == 0 and it[1].steps == 1
                                    and it[1].block_size >= shape[d] and not it[1].dynamic)
        if whole:
            rest.append(("full",))
        elif it[0] in ("int", "grid") and not tiled:
            rest.append(it)
        else:
            return None
    if len(shape) == 2 and dtype.itemsize != 4:
        return None  # a 16-bit row is half a packed sublane: not a legal copy
    row = tuple(s for s, it in zip(shape[1:], rest, strict=True) if it[0] == "full")
    if len(shape) == 2:
        row = (shape[1],)
    return t, tuple(rest), row, False


def _flat_view_root(ir: KernelIR, t: HostTensor) -> HostTensor | None:
    """For `x.view(-1)` of a contiguous 32-bit array whose last dim is whole 128-lane chunks: that array."""
    base = viewed(t.value)
    if base is t.value or len(base.shape) < 2 or base.shape[-1] % CHUNK or base.meta.numel() != t.value.meta.numel():
        return None
    for h in ir.tensors:
        if h.value is base:
            return h
    name = next((p for p, v in ir.args.items() if v is base), None)
    return HostTensor(base, name or t.name, "arg" if name else "derived")


# -- the index, one element at a time ------------------------------------------------------------------------

Pos = tuple[tuple[str, int | None], ...]  # per dim of a value: (position text, axis of the index it follows)


class ScalarIndex:
    """Element `pos` of an int index tensor as scalar code: SMEM reads of the int32 tensors it loads, loop
    positions (`begin(dim)`) and integer arithmetic. Raises NotScalar for anything else. `partial` collects
    (tile, index axis) for each partial tile whose positions the index follows (positions past its end are
    padding: a scatter skips them)."""

    def __init__(self, begin: Callable[[TileDim], str], block_id: Callable[[TileDim], str],
                 smem: Callable[[HostTensor], str]):
        self.begin = begin  # a tile's first position (an hl.grid's index) in the scope of the generated code
        self.block_id = block_id  # a tile's block number there
        self.smem = smem  # the SMEM ref of an index table
        self.tables: dict[int, HostTensor] = {}
        self.partial: set[tuple[TileDim, int]] = set()

    def render(self, v: object, pos: Pos, depth: int = 0) -> str:
        if depth > 64:
            raise NotScalar
        if isinstance(v, NamedConst):
            v = v.value
        if isinstance(v, bool):
            return "True" if v else "False"
        if isinstance(v, int):
            return str(v)
        if not isinstance(v, Value):
            raise NotScalar
        p = v.producer
        if isinstance(p, Load):
            return self._load(p, pos, depth)
        if not isinstance(p, Op):
            raise NotScalar
        k, a = p.kind, p.args
        if k == "iota":
            if not a:
                return pos[0][0]
            d = a[0][1]
            self._tile(d, pos[0][1])
            return f"({self.begin(d)} + {pos[0][0]})"
        if k in ("tile_begin", "tile_end", "tile_id"):
            d: TileDim = a[0]
            if d.dynamic or d.parent is not None:
                raise NotScalar
            if k == "tile_id":
                return self.block_id(d)
            if k == "tile_begin":
                return self.begin(d)
            end = f"{self.begin(d)} + {d.block_size}"
            return f"jnp.minimum({end}, {d.extent})" if d.partial else f"({end})"
        if k == "to":
            if p.kwargs["dtype"] not in _INT_DTYPES:
                raise NotScalar
            return self.render(a[0], self._broadcast(a[0], v, pos), depth + 1)
        if k == "neg":
            return f"(-{self.render(a[0], self._broadcast(a[0], v, pos), depth + 1)})"
        if k in _INFIX:
            x, y = (self.render(b, self._broadcast(b, v, pos), depth + 1) for b in a[:2])
            return f"({x} {_INFIX[k]} {y})"
        if k in ("maximum", "minimum", "where"):
            args = ", ".join(self.render(b, self._broadcast(b, v, pos), depth + 1) for b in a)
            return f"jnp.{k}({args})"
        if k == "clamp":
            x = self.render(a[0], self._broadcast(a[0], v, pos), depth + 1)
            lo, hi = p.kwargs.get("min"), p.kwargs.get("max")
            if any(b is not None and not isinstance(b, int) for b in (lo, hi)):
                raise NotScalar
            return f"jnp.clip({x}, {lo}, {hi})"
        if k == "broadcast_to":
            return self.render(a[0], self._broadcast(a[0], v, pos), depth + 1)
        if k == "mask" and a[1] == PAST_END and not p.kwargs["live"] and not any(p.kwargs["lanes"]):
            for axis, d in p.kwargs["dims"]:  # a scatter's positions at a partial tile's padding: no copy
                if not isinstance(d, TileDim) or pos[axis][1] is None:
                    raise NotScalar
                self._tile(d, pos[axis][1])
            return self.render(a[0], pos, depth + 1)
        if k == "index":
            return self.render(a[0], _index_positions(p.kwargs["items"], a[0], pos), depth + 1)
        if k == "reshape":
            return self.render(a[0], _reshape_positions(a[0], v, pos), depth + 1)
        raise NotScalar

    @staticmethod
    def _broadcast(arg: object, out: Value, pos: Pos) -> Pos:
        if not isinstance(arg, Value):
            return ()
        shape = arg.shape
        mine = pos[len(pos) - len(shape):] if shape else ()
        return tuple(("0", None) if s == 1 and out.shape[len(pos) - len(shape) + i] != 1 else q
                     for i, (s, q) in enumerate(zip(shape, mine, strict=True)))

    def _tile(self, d: TileDim, axis: int | None) -> None:
        if d.dynamic or d.parent is not None:
            raise NotScalar
        if d.partial and axis is not None:
            self.partial.add((d, axis))

    def _load(self, n: Load, pos: Pos, depth: int) -> str:
        t = n.tensor
        if t.value.dtype != torch.int32:
            raise NotScalar
        shape = t.value.shape
        parts, k, d = [], 0, 0
        for it in n.index:
            kind = it[0]
            if kind == "newaxis":
                k += 1
                continue
            size = shape[d]
            if kind == "tile":
                td = it[1]
                self._tile(td, pos[k][1])
                at = f"{self.begin(td)} + {pos[k][0]}"
                parts.append(f"jnp.minimum({at}, {size - 1})" if td.begin + td.steps * td.block_size > size else at)
                k += 1
            elif kind == "full":
                parts.append(pos[k][0])
                k += 1
            elif kind == "window" and it[3] > 0:
                start = self.render(it[1], (), depth + 1)
                parts.append(f"jnp.clip({start} + {pos[k][0]} * {it[3]}, 0, {size - 1})")
                k += 1
            elif kind == "int":
                parts.append(str(it[1]))
            elif kind in ("grid", "id"):
                td = it[1]
                if td.dynamic or td.parent is not None:
                    raise NotScalar
                parts.append(self.begin(td) if kind == "grid" else self.block_id(td))
            elif kind == "scalar":
                s = self.render(it[1], (), depth + 1)
                parts.append(f"jnp.clip(jnp.where({s} < 0, {s} + {size}, {s}), 0, {size - 1})")
            else:
                raise NotScalar
            d += 1
        self.tables[t.value.id] = t
        return f"{self.smem(t)}[{', '.join(parts)}]"


def _index_positions(items: tuple, arg: Value, pos: Pos) -> Pos:
    """`x[:, None]`-style indexing of a value: which of the result's positions each of `arg`'s dims takes."""
    if any(it is Ellipsis for it in items):
        i = items.index(Ellipsis)
        fill = len(arg.shape) - sum(1 for it in items if it is not None and it is not Ellipsis)
        items = items[:i] + (slice(None),) * fill + items[i + 1:]
    out, k = [], 0
    for it in items:
        if it is None:
            k += 1
        elif isinstance(it, slice) and it == slice(None):
            out.append(pos[k])
            k += 1
        elif isinstance(it, int) and not isinstance(it, bool):
            out.append((str(it % arg.shape[len(out)]), None))
        else:
            raise NotScalar
    out.extend(pos[k:])
    if len(out) != len(arg.shape):
        raise NotScalar
    return tuple(out)


def _reshape_positions(arg: Value, out: Value, pos: Pos) -> Pos:
    """A reshape that only adds or drops size-1 dims keeps each other dim's position."""
    kept = [q for s, q in zip(out.shape, pos, strict=True) if s != 1]
    if [s for s in arg.shape if s != 1] != [s for s in out.shape if s != 1]:
        raise NotScalar
    it = iter(kept)
    return tuple(("0", None) if s == 1 else next(it) for s in arg.shape)
