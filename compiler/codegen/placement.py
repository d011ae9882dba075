"""Where one access's block comes from: per tensor dim, the block size, the index-map entry and how the
kernel then indexes the block.

Each dim of an access ends up in one of three modes (`DimPlan.mode`):
- "block":    the BlockSpec block is exactly the positions accessed (a launch-grid tile, a block streamed by
              emit_pipeline, the whole dim, a window whose start is a proven multiple of its size); the
              kernel reads it with `:`.
- "squeezed": one position chosen by the index map (`x[b, h, tile, :]` with `b = bh // heads`); the dim is
              dropped from the block (`pl.Squeezed()`).
- "group":    one position, made of launch-grid positions, on one of the two (8, 128)-tiled dims, which cannot be
              squeezed: the block is the aligned group of rows (8 of 32-bit values, 16 of 16-bit, 32 of 8-bit) or
              128 lanes holding it, chosen by the index map (`h // 16`), and the kernel picks `h % 16` from it (a
              `[batch, tokens, heads, dim]` tensor read one head per step keeps 16 heads in VMEM, not all of them).
- "sliced":   the block spans the whole dim (or a launch-grid tile's block, for sub-tiles) and the kernel
              picks positions inside it: `pl.ds` for inner tiles and windows, a scalar for a position the index
              map cannot compute (loaded data, inner-loop positions, the two (8, 128)-tiled dims), `:` plus a
              one-hot gather / scatter for tensor indices.
A position can go in an index map only if it is made of launch-grid positions and constants (or, in an
emit_pipeline spec, also of the streaming loop's positions) - see `index_exprs`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..frontend import index_exprs as ix
from ..ir.tile_ir import InnerLoop, Load, Store, TileDim, viewed
from ..support.diagnostics import UserError
from .work import sublane_rows


def py_name(name: str) -> str:
    """A tensor or loop name as a Python identifier."""
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name).strip("_") or "v"
    return out if not out[0].isdigit() else "v" + out


@dataclass(frozen=True)
class DimPlan:
    block: int | None  # None = squeezed
    outer: str  # entry of the top-level BlockSpec index map
    inner: str  # entry of the emit_pipeline BlockSpec index map (hbm operands)
    mode: str  # block | squeezed | group | sliced
    grid_axes: frozenset[int] = frozenset()
    inner_walk: bool = False  # the streaming inner loop walks this dim


@dataclass(frozen=True)
class Placement:
    dims: tuple[DimPlan, ...]  # one per tensor dim

    @property
    def block_shape(self) -> tuple[int | None, ...]:
        return tuple(d.block for d in self.dims)


class CannotStream(Exception):
    """An access under emit_pipeline that an inner BlockSpec cannot express (it stays resident instead)."""


def tiled_layout_dim(d: int, shape: tuple[int, ...]) -> bool:
    """A block may not squeeze one of the last two dims (the (8, 128)-tiled ones) unless the array's is 1."""
    return d >= len(shape) - 2 and shape[d] != 1


def layout_tiling(d: int, shape: tuple[int, ...], dtype: torch.dtype) -> int:
    """How finely the TPU lays out array dim `d` in HBM/VMEM: (sublane rows, 128 lanes) tiles; 1 for leading dims."""
    if len(shape) == 1:
        return 1024
    if d == len(shape) - 1:
        return 128
    if d == len(shape) - 2:
        return sublane_rows(dtype)
    return 1


def resident_extent(td: TileDim, d: int, shape: tuple[int, ...], dtype: torch.dtype) -> int:
    """The block size of array dim `d` when an inner loop slices it resident in VMEM: the whole dim, padded up
    to a legal block when the loop's last (partial or offset) block runs past the array's end."""
    need = td.begin + td.steps * td.block_size
    if td.dynamic or need <= shape[d]:  # a device-bounded loop's window is clamped inside the dim
        return shape[d]
    if len(shape) == 1:  # a rank-1 block is a multiple of 1024 or a power of two
        return min(-(-need // 1024) * 1024, 1 << (need - 1).bit_length())
    mult = layout_tiling(d, shape, dtype) if d >= len(shape) - 2 else 1
    return -(-need // mult) * mult


KEPT_MODES = ("block", "sliced", "group")  # modes of the dims a block keeps (the kernel indexes them)
DEVICE_POSITIONS = ("grid", "id", "scalar")  # index items of one position known only on the device


def kept_dims(index: tuple, modes: tuple[str, ...]) -> list[tuple[int, tuple, str, bool]]:
    """The dims of an access its block keeps, in order (one per part of the kernel's subscript): (tensor dim,
    index item, mode, whether it picks one position, the dim then leaving the value)."""
    items = [it for it in index if it[0] != "newaxis"]
    return [(d, it, mode, mode == "group" or (mode == "sliced" and it[0] in ("int", *DEVICE_POSITIONS)))
            for d, (it, mode) in enumerate(zip(items, modes, strict=True)) if mode in KEPT_MODES]


def masks_pick(lane: bool, dtype: torch.dtype, one_element: bool) -> bool:
    """Must a position picked on a device-known index along the lane dim (`lane`) or the row dim of a VMEM block
    be masked out of the whole block dim? Always for lanes; for rows of values narrower than 32 bits, or for one
    element (libtpu for v5e: E2003 unless the row is a proven multiple of 8, "Only 32-bit scalar vector.extracts",
    "dynamic load with unaligned indices" for one f32 element; whole 32-bit rows it shifts itself). Bool rows are
    read as they are (the conformance case grid_row_count_bool ran on the v5e)."""
    return lane or ((dtype.itemsize < 4 or one_element) and dtype != torch.bool)


def _block_ok(d: int, shape: tuple[int, ...], n: int, itemsize: int) -> bool:
    """May a block of `n` positions tile dim `d` (TPU block-shape rules)?"""
    if n == shape[d]:
        return True
    if len(shape) == 1:
        return n % (128 * max(1, 4 // itemsize)) == 0
    if d == len(shape) - 1:
        return n % 128 == 0
    if d == len(shape) - 2:
        return n % (8 * max(1, 4 // itemsize)) == 0
    return True


class Placer:
    """Places the accesses of one grid loop; `grid_dims` maps (loop_id, axis) -> launch-grid axis."""

    def __init__(self, grid_dims: dict[tuple[int, int], int], grid_names: list[str],
                 whole: frozenset[int] = frozenset()):
        self.grid_dims = grid_dims
        self.grid_names = grid_names
        self.whole = whole  # tensors (`viewed` root value ids) kept whole in VMEM for the call: one block
        self.grid_loops = {k[0] for k in grid_dims}
        # a launch-grid tile's block the TPU cannot tile was read whole: VMEM then falls as that block grows
        self.widened = False

    # -- naming positions in index maps ------------------------------------------------------------------

    def _grid_position(self, d: TileDim, kind: str) -> str | None:
        g = self.grid_dims.get((d.loop_id, d.axis))
        if g is None:
            return None
        return _position(self.grid_names[g], d, kind)

    def _inner_position(self, streaming: InnerLoop | None):
        own = {(d.loop_id, d.axis) for d in streaming.dims} if streaming is not None else set()

        def position(d: TileDim, kind: str) -> str | None:
            if (d.loop_id, d.axis) in own:
                return _position(py_name(d.name), d, kind)
            return self._grid_position(d, kind)

        return position

    def _axes(self, v: object) -> frozenset[int]:
        """The launch-grid axes a position reads (per dim of a multi-dim hl.tile, not the whole loop)."""
        dims = ix.deps(v).dims
        return frozenset(g for key, g in self.grid_dims.items() if key in dims)

    # -- one access ----------------------------------------------------------------------------------------

    def keeps_whole(self, n: Load | Store) -> bool:
        return viewed(n.tensor.root.value).id in self.whole

    def place(self, n: Load | Store, streaming: InnerLoop | None, memory: str) -> Placement:
        shape = tuple(n.tensor.value.shape)
        itemsize = n.tensor.value.dtype.itemsize
        if self.keeps_whole(n):  # every access slices the one block, which stays put over the whole grid
            return Placement(tuple(DimPlan(size, "0", "0", "sliced") for size in shape))
        dims: list[DimPlan] = []
        d = 0
        for it in n.index:
            if it[0] == "newaxis":
                continue
            dims.append(self._dim(n, it, d, shape, itemsize, streaming, memory))
            d += 1
        return Placement(tuple(dims))

    def _dim(self, n: Load | Store, it: tuple, d: int, shape: tuple[int, ...], itemsize: int,
             streaming: InnerLoop | None, memory: str) -> DimPlan:
        kind, size = it[0], shape[d]
        hbm = memory == "hbm"
        whole = DimPlan(size, "0", "0", "sliced")
        if kind == "full":
            return DimPlan(size, "0", "0", "block")
        if kind == "int":
            if len(shape) == 1 and not hbm:  # `scale[0]` of a [1] tensor: a 0-d VMEM block cannot be stored to
                return whole
            return whole if tiled_layout_dim(d, shape) else DimPlan(None, str(it[1]), str(it[1]), "squeezed")
        if kind in ("tile", "grid", "id"):
            return self._loop_dim(n, kind, it[1], d, shape, streaming, memory)
        if kind == "gather":
            if hbm:
                raise CannotStream
            return whole
        if kind == "scalar":
            return self._scalar_dim(n, it[1], d, shape, streaming, hbm)
        # a window
        start, count, step = it[1], it[2], it[3]
        if step == 1 and _is_const(start) is None and _block_ok(d, shape, count, itemsize) \
                and ix.multiple(start) % count == 0:
            outer = _block_index(start, count, self._grid_position)
            if outer is not None and not hbm:
                return DimPlan(count, outer, outer, "block", self._axes(start))
            inner = _block_index(start, count, self._inner_position(streaming)) if hbm else None
            if inner is not None:
                walks = bool(streaming and ix.deps(start).loops & {streaming.dims[0].loop_id})
                return DimPlan(count, "0", inner, "block", self._axes(start), walks)
        if hbm:
            raise CannotStream
        return whole

    def _group(self, n: Load | Store, d: int, shape: tuple[int, ...], position: str | None,
               axes: frozenset[int]) -> DimPlan:
        """One read position on a tiled dim: the aligned group of rows or lanes holding it when the index map can
        name it (launch-grid positions, proven inside the dim), else the whole dim; the kernel picks it."""
        rows = 128 if d == len(shape) - 1 else 8 * max(1, 4 // n.tensor.value.dtype.itemsize)
        if position is None or not isinstance(n, Load) or len(shape) < 2 or shape[d] <= rows:
            return DimPlan(shape[d], "0", "0", "sliced")
        entry = f"{position} // {rows}"
        return DimPlan(rows, entry, entry, "group", axes)

    def _scalar_dim(self, n: Load | Store, v: object, d: int, shape: tuple[int, ...], streaming: InnerLoop | None,
                    hbm: bool) -> DimPlan:
        if tiled_layout_dim(d, shape) and not hbm:
            b = ix.bounds(v)
            outer = ix.render(v, self._grid_position) if b is not None and 0 <= b[0] and b[1] < shape[d] else None
            return self._group(n, d, shape, outer, self._axes(v))
        if not tiled_layout_dim(d, shape):
            outer = ix.render(v, self._grid_position)
            if outer is not None:
                text = ix.strip_parens(outer)
                return DimPlan(None, text, text, "squeezed", self._axes(v))
            if hbm:
                inner = ix.render(v, self._inner_position(streaming))
                if inner is not None:
                    return DimPlan(None, "0", ix.strip_parens(inner), "squeezed", self._axes(v), True)
        if hbm:
            raise CannotStream
        return DimPlan(shape[d], "0", "0", "sliced")

    def _loop_dim(self, n: Load | Store, kind: str, td: TileDim, d: int, shape: tuple[int, ...],
                  streaming: InnerLoop | None, memory: str) -> DimPlan:
        size = shape[d]
        g = self.grid_dims.get((td.loop_id, td.axis))
        if g is not None and kind != "tile" and tiled_layout_dim(d, shape):
            # one row of a dim the TPU tiles (last two): the group of rows holding it, or the whole dim, in VMEM
            lo, hi = (0, td.steps - 1) if kind == "id" else (td.begin, td.extent - 1)
            inside = not td.dynamic and 0 <= lo and hi < size
            return self._group(n, d, shape, _position(self.grid_names[g], td, kind) if inside else None,
                               frozenset({g}))
        if g is not None and kind == "tile" and isinstance(n, Load) and (len(shape) == 1 or tiled_layout_dim(d, shape)) \
                and not _block_ok(d, shape, td.block_size, n.tensor.value.dtype.itemsize if len(shape) == 1 else 4):
            # a block the TPU cannot tile, read (a 4-entry block of 5 offsets: `offsets[tile_b]`; 32 lanes of a
            # 64-lane head): the whole dim stays in VMEM and the kernel slices its tile's positions from it. On the
            # last two dims the rule is Mosaic's (8, 128) for every dtype: 8 rows of bf16 ran on the v5e (bench/chip)
            self.widened = True
            return DimPlan(size, "0", "0", "sliced")
        if g is not None:
            name = self.grid_names[g]
            if kind == "tile":
                if td.begin % td.block_size:
                    raise UserError("HPL202", f"tile `{td.name}` starts at {td.begin}, not a multiple of its block "
                                              f"size {td.block_size}", n.range)
                off = td.begin // td.block_size
                expr = name if not off else f"{name} + {off}"
                return DimPlan(td.block_size, expr, expr, "block", frozenset({g}))
            expr = name if kind == "id" or not td.begin else f"{name} + {td.begin}"
            return DimPlan(None, expr, expr, "squeezed", frozenset({g}))
        hbm = memory == "hbm"
        inner_name = py_name(td.name)
        if kind != "tile":  # an hl.grid index (or tile.id) of an inner loop: one row per iteration
            if hbm and d == len(shape) - 1 and size != 1:
                raise CannotStream  # a streamed block one lane wide cannot be copied: slice it in VMEM instead
            if hbm:
                expr = inner_name if kind == "id" or not td.begin else f"{inner_name} + {td.begin}"
                return DimPlan(None, "0", expr, "squeezed", inner_walk=True)
            return DimPlan(size, "0", "0", "sliced", inner_walk=True)
        if td.parent is not None:  # a sub-tile of a grid tile: blocks live inside that tile's block
            p = self.grid_dims.get((td.parent.loop_id, td.parent.axis))
            if p is None or td.parent.block_size % td.block_size:
                raise UserError("HPL101", f"`{td.name}` must sub-tile a launch-grid tile with a block size that "
                                          f"divides {td.parent.block_size}", n.range)
            name = self.grid_names[p]
            per = td.parent.block_size // td.block_size
            if hbm:
                return DimPlan(td.block_size, name, f"{name} * {per} + {inner_name}", "block", frozenset({p}), True)
            return DimPlan(td.parent.block_size, name, name, "sliced", frozenset({p}), True)
        if hbm:
            off = td.begin // td.block_size  # _streamable: begin is a whole number of blocks
            return DimPlan(td.block_size, "0", inner_name if not off else f"{inner_name} + {off}", "block",
                           inner_walk=True)
        return DimPlan(resident_extent(td, d, shape, n.tensor.value.dtype), "0", "0", "sliced", inner_walk=True)


def _is_const(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _position(name: str, d: TileDim, kind: str) -> str:
    """A loop position in terms of its block index `name`."""
    if kind == "id" or d.api == "grid":
        return name if kind == "id" or not d.begin else f"({name} + {d.begin})"
    begin = name if d.block_size == 1 else f"({name} * {d.block_size})"
    if d.begin:
        begin = f"({begin} + {d.begin})"
    if kind == "end":
        return f"jnp.minimum({begin} + {d.block_size}, {d.extent})"
    return begin


def _block_index(start: object, count: int, position) -> str | None:
    """The block number of a window of `count` positions starting at `start` (a proven multiple of count):
    `t + 4` for `t.index + 32` with blocks of 8, else `(start) // count`."""
    form = ix.affine(start)
    if form is not None:
        terms, const = form
        if const % count == 0 and all(k % count == 0 for k in terms.values()):
            parts = []
            for d, k in terms.items():
                name = position(d, "id")
                if name is None:
                    break
                parts.append(name if k == count else f"{k // count} * {name}")
            else:
                if const or not parts:
                    parts.append(str(const // count))
                return " + ".join(parts).replace("+ -", "- ")
    text = ix.render(start, position)
    if text is None:
        return None
    return f"{text} // {count}" if count != 1 else ix.strip_parens(text)


def describe(n: Load | Store, modes: tuple[str, ...]) -> str:
    """How an access with computed positions is carried out, for hovers ('' for plain tile accesses)."""
    parts = []
    shape = n.tensor.value.shape
    d = 0
    for it in n.index:
        if it[0] == "newaxis":
            continue
        mode = modes[d] if d < len(modes) else "block"
        kind = it[0]
        if kind == "gather":
            what = "scatter into" if isinstance(n, Store) else "gather from"
            rule = "; a position given twice keeps the later value" if isinstance(n, Store) else ""
            parts.append(f"dim {d}: {what} all {shape[d]} positions resident in VMEM (one-hot matmul{rule})")
        elif kind == "scalar":
            where = "chosen by the index map" if mode == "squeezed" else "read inside the kernel"
            parts.append(f"dim {d}: one computed position, {where}")
        elif kind == "window":
            start = "a computed start" if not isinstance(it[1], int) else f"{it[1]}"
            step = f", step {it[3]}" if it[3] != 1 else ""
            where = "a whole block" if mode == "block" else "sliced from the whole dim in VMEM"
            parts.append(f"dim {d}: {it[2]} positions from {start}{step}, {where}")
        d += 1
    return "; ".join(parts)
