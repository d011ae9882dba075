"""How the kernel indexes the blocks it was given: the subscript of each ref read and write.

A dim placed "block" or "squeezed" (see `placement`) needs nothing in the kernel (`:` / absent), a "group" dim
picks its position's offset in the group; a "sliced"
dim is indexed here from its IR index item: `pl.ds(start, size)` for inner tiles and windows, a scalar for
one position, `:` plus the `_gather` / `_scatter` helpers for tensor indices. Computed positions that are not
proven to lie inside the array are brought inside it (the TPU never reads out of bounds): a scalar wraps
negatives like torch and is clamped, a window start is clamped so the whole window fits.

Mosaic addresses the last two dims of a VMEM ref at a start known only on the device when it can prove the
start a multiple of the dim's tiling (128 lanes; 8 rows, 32 of 8-bit values; any row of 32-bit values when the
ref is one lane tile wide), and refuses the kernel otherwise (E2003). A window it cannot prove aligned (a jagged segment's rows, `offsets[t + 1]`,
a 64-lane block) is read as an exact `_gather` of the dim and written with `_scatter` instead: the same values,
at a cost that grows with the dim's length. One position picked at a device-known index on the lane dim, or on
the row dim of a value narrower than 32 bits (or one element), is taken out of its block dim with a mask and a
sum (and stored by merging it into its rows under the mask): `placement.masks_pick` says which.
"""

from __future__ import annotations

import math

import torch

from ..frontend import index_exprs as ix
from ..ir.tile_ir import Load, Store, TileDim, Value
from ..support.diagnostics import UserError
from . import outputs
from .exprs import dtype_text
from .placement import DEVICE_POSITIONS, kept_dims, masks_pick
from .plan_builder import CallLayout, OperandLayout

LANES = 128  # a dynamic lane offset must be a multiple of this


def sublane_multiple(dtype: torch.dtype) -> int:
    """Rows a dynamic sublane offset must be a multiple of (libtpu 0.0.42's deviceless compile for v5e: 8 for
    32- and 16-bit types, loads and stores; 32 for 8-bit ones)."""
    return 8 if dtype.itemsize >= 2 else 32

HELPERS = {
    "wrap_index": (
        "def _wrap_index(i, n):\n"
        '    """A computed position as torch reads it (negative counts from the end), kept inside [0, n); `- (-n)`\n'
        '    keeps every constant inside int32 for a dim of 2**31."""\n'
        "    return jnp.clip(jnp.where(i < 0, i - (-n), i), 0, n - 1)\n"
    ),
    "gather": (
        "def _gather(block, idx, axis, direct=False):\n"
        '    """block[..., idx, ...] along `axis` (the whole dim is in the block), exactly: a one-hot matmul at\n'
        "    HIGHEST precision for floats, the 16-bit halves through two one-hot matmuls for integers. `direct`\n"
        "    (interpret mode only): the same values by jnp.take, whose cost on a CPU is the positions', not positions x\n"
        "    rows (a position outside the dim picks 0 either way).\"\"\"\n"
        "    rows = block.shape[axis]\n"
        "    idx = jnp.where(idx < 0, idx + rows, idx)\n"
        "    if direct:\n"
        "        idx = jnp.where((idx >= 0) & (idx < rows), idx, rows)  # take's fill would wrap a negative one again\n"
        "        return jnp.take(block, idx, axis=axis, mode=\"fill\", fill_value=0)\n"
        "    one_hot = idx[..., None] == jax.lax.broadcasted_iota(jnp.int32, idx.shape + (rows,), idx.ndim)\n"
        "    if idx.ndim != 1:  # built at the index's shape, then stacked: Mosaic cannot flatten the index itself\n"
        "        one_hot = one_hot.astype(jnp.float32).reshape(-1, rows)\n"
        "    table = jnp.moveaxis(block, axis, 0)\n"
        "    rest = table.shape[1:]\n"
        "    if not rest and table.dtype.itemsize < 4:  # Mosaic makes no column of 16- or 8-bit values: widen first\n"
        "        table = table.astype(jnp.float32 if jnp.issubdtype(table.dtype, jnp.floating) else jnp.int32)\n"
        "    if len(rest) != 1:\n"
        "        table = table.reshape(rows, -1)\n"
        "    out = _one_hot_rows(one_hot, table)\n"
        "    out = out.reshape(idx.shape + rest).astype(block.dtype)\n"
        "    if axis:\n"
        "        out = jnp.moveaxis(out, tuple(range(idx.ndim)), tuple(range(axis, axis + idx.ndim)))\n"
        "    return out\n"
    ),
    "gather_chunked": (
        "def _gather_chunked(ref, idx, chunk):\n"
        '    """ref[idx] along its first dim, as `_gather` gives it, a `chunk` of the table rows at a time in a loop:\n'
        "    the one-hot of a long table at once is code that grows with the table (positions x rows), which the TPU\n"
        "    compiler takes minutes over. Each position takes its row from the one chunk holding it. `chunk` None\n"
        "    (interpret mode): the whole table at once, no loop, the same values by `_gather`'s direct path.\"\"\"\n"
        "    if chunk is None:\n"
        "        return _gather(ref[...], idx, 0, direct=True)\n"
        "    rows = ref.shape[0]\n"
        "    idx = jnp.where(idx < 0, idx + rows, idx)\n"
        "    rest = ref.shape[1:]\n"
        "\n"
        "    def step(c, found):\n"
        "        start = pl.multiple_of(c * chunk, chunk)\n"
        "        local = jnp.where((idx >= start) & (idx < start + chunk), idx - start, chunk)  # chunk: none here\n"
        "        part = _gather(ref[pl.ds(start, chunk)], local, 0)\n"
        "        return jnp.where((local < chunk).reshape(idx.shape + (1,) * len(rest)), part, found)\n"
        "\n"
        "    return jax.lax.fori_loop(0, rows // chunk, step, jnp.zeros(idx.shape + rest, ref.dtype))\n"
    ),
    "scatter": (
        "def _scatter(block, idx, values, axis, valid=None, direct=False):\n"
        '    """block with block[..., idx, ...] = values along `axis`. A position given twice is written once: by the\n'
        "    last of its rows that changes it (torch leaves the order of duplicates undefined; rows that rewrite the\n"
        "    old value, such as masked-off rows pointing at a valid one, then cannot undo a real write). Positions\n"
        "    past the end, and where `valid` is false (a partial tile's padding), write nothing. `direct` (interpret\n"
        "    mode only): the same writes by jnp's gather and scatter-max, whose cost on a CPU is positions + rows,\n"
        "    not the one-hots' positions x rows.\"\"\"\n"
        "    rows = block.shape[axis]\n"
        "    flat = idx.reshape(-1)\n"
        "    flat = jnp.where(flat < 0, flat + rows, flat)\n"
        "    k = flat.shape[0]\n"
        "    if valid is not None:  # int: no i1 reshapes\n"
        "        ok = valid.astype(jnp.int32).reshape(k)\n"
        "        flat = jnp.where(ok != 0, flat, rows)\n"
        "    table = jnp.moveaxis(block, axis, 0)\n"
        "    rest = table.shape[1:]\n"
        "    vals = jnp.moveaxis(values, tuple(range(axis, axis + idx.ndim)), tuple(range(idx.ndim)))\n"
        "    vals = vals.reshape((k,) + rest)\n"
        "    if valid is not None:  # padding values (NaN in interpret mode) must not reach the selection matmul\n"
        "        vals = jnp.where(ok.reshape((k,) + (1,) * len(rest)) != 0, vals, 0)\n"
        "    if len(rest) != 1:\n"
        "        table, vals = table.reshape(rows, -1), vals.reshape(k, -1)\n"
        "    if direct:  # each row's value: that of the last position that hits it and changes it, else the old one\n"
        "        hit = (flat >= 0) & (flat < rows)\n"
        "        old = jnp.take(table, jnp.where(hit, flat, 0), axis=0)\n"
        "        changes = hit & jnp.any(vals != old, axis=1)\n"
        "        last = jnp.full((rows,), -1, jnp.int32).at[jnp.where(changes, flat, rows)].max(\n"
        "            jnp.arange(k, dtype=jnp.int32), mode=\"drop\")\n"
        "        out = jnp.where((last >= 0)[:, None], jnp.take(vals, jnp.maximum(last, 0), axis=0), table)\n"
        "        out = out.reshape((rows,) + rest)\n"
        "        return jnp.moveaxis(out, 0, axis) if axis else out\n"
        "    hits = jax.lax.broadcasted_iota(jnp.int32, (rows, k), 0) == flat[None, :]\n"
        "    picks = flat[:, None] == jax.lax.broadcasted_iota(jnp.int32, (k, rows), 1)  # not hits.T: no i1 transposes\n"
        "    old = _one_hot_rows(picks, table)\n"
        "    changes = jnp.sum((vals != old).astype(jnp.int32), axis=1) > 0  # Mosaic cannot reduce these i1 lanes\n"
        "    later = jax.lax.broadcasted_iota(jnp.int32, (k, k), 1) > jax.lax.broadcasted_iota(jnp.int32, (k, k), 0)\n"
        "    overwritten = jnp.any((flat[:, None] == flat[None, :]) & later & changes[None, :], axis=1)\n"
        "    one_hot = hits & (changes & ~overwritten)[None, :]\n"
        "    written = jnp.any(one_hot, axis=1, keepdims=True)\n"
        "    out = jnp.where(written, _one_hot_rows(one_hot, vals), table).reshape((rows,) + rest)\n"
        "    return jnp.moveaxis(out, 0, axis) if axis else out\n"
    ),
    "scatter_add": (
        "def _scatter_add(block, idx, values, axis, valid=None, direct=False):\n"
        '    """block with values added at block[..., idx, ...] along `axis` (hl.atomic_add): a position given several\n'
        "    times gets all of its values, summed by a one-hot matmul (floats at HIGHEST precision, non-finite sums\n"
        "    counted apart; integers in 8-bit pieces, each sum exact in f32, wrapping like int32 atomics). Positions\n"
        "    past the end, and where `valid` is false (a partial tile's padding), add nothing. `direct` (interpret\n"
        "    mode only): the same sums by jnp's scatter-add (floats summed in another order: rounding apart), whose\n"
        "    cost on a CPU is positions + rows, not the one-hot's positions x rows.\"\"\"\n"
        "    rows = block.shape[axis]\n"
        "    flat = idx.reshape(-1)\n"
        "    flat = jnp.where(flat < 0, flat + rows, flat)\n"
        "    k = flat.shape[0]\n"
        "    table = jnp.moveaxis(block, axis, 0)\n"
        "    rest = table.shape[1:]\n"
        "    vals = jnp.moveaxis(values, tuple(range(axis, axis + idx.ndim)), tuple(range(idx.ndim)))\n"
        "    vals = vals.reshape(k, -1)\n"
        "    if valid is not None:  # int: no i1 reshapes\n"
        "        ok = valid.astype(jnp.int32).reshape(k)\n"
        "        flat = jnp.where(ok != 0, flat, rows)\n"
        "        vals = jnp.where(ok[:, None] != 0, vals, 0)\n"
        "    if direct:\n"
        "        wide = jnp.float32 if jnp.issubdtype(vals.dtype, jnp.floating) else jnp.int32\n"
        "        at = jnp.where((flat >= 0) & (flat < rows), flat, rows)  # a negative one would wrap again\n"
        "        total = jnp.zeros((rows, vals.shape[1]), wide).at[at].add(vals.astype(wide), mode=\"drop\")\n"
        "        out = (table.reshape(rows, -1).astype(wide) + total).astype(block.dtype).reshape((rows,) + rest)\n"
        "        return jnp.moveaxis(out, 0, axis) if axis else out\n"
        "    hits = (jax.lax.broadcasted_iota(jnp.int32, (rows, k), 0) == flat[None, :]).astype(jnp.float32)\n"
        "    dot = functools.partial(jnp.dot, precision=jax.lax.Precision.HIGHEST, preferred_element_type=jnp.float32)\n"
        "    if jnp.issubdtype(vals.dtype, jnp.floating):\n"
        "        wide = vals.astype(jnp.float32)\n"
        "        finite = jnp.isfinite(wide)\n"
        "        total = dot(hits, jnp.where(finite, wide, 0))\n"
        "        plus = dot(hits, (wide == jnp.inf).astype(jnp.float32))\n"
        "        minus = dot(hits, (wide == -jnp.inf).astype(jnp.float32))\n"
        "        nans = dot(hits, jnp.isnan(wide).astype(jnp.float32))\n"
        "        total = jnp.where((nans > 0) | ((plus > 0) & (minus > 0)), jnp.nan,\n"
        "                          jnp.where(plus > 0, jnp.inf, jnp.where(minus > 0, -jnp.inf, total)))\n"
        "        out = table.reshape(rows, -1).astype(jnp.float32) + total\n"
        "    else:\n"
        "        wide = vals.astype(jnp.int32)\n"
        "        total = jnp.zeros((rows, wide.shape[1]), jnp.int32)\n"
        "        for shift in (0, 8, 16, 24):\n"
        "            piece = dot(hits, ((wide >> shift) & 0xFF).astype(jnp.float32)).astype(jnp.int32)\n"
        "            total = total + (piece << shift)\n"
        "        out = table.reshape(rows, -1).astype(jnp.int32) + total\n"
        "    out = out.astype(block.dtype).reshape((rows,) + rest)\n"
        "    return jnp.moveaxis(out, 0, axis) if axis else out\n"
    ),
    "one_hot_rows": (
        "def _one_hot_rows(one_hot, table):\n"
        '    """one_hot @ table for a 0/1 matrix with at most one 1 per row: the selected rows, bit for bit (f32 at\n'
        "    HIGHEST precision; 16-bit floats are exact at the default, the only one the MXU takes for them). In the\n"
        "    product 0 * inf is NaN, so non-finite entries are selected by a second, exact matmul of their kind.\"\"\"\n"
        "    dot = functools.partial(jnp.dot, precision=jax.lax.Precision.HIGHEST, preferred_element_type=jnp.float32)\n"
        "    if jnp.issubdtype(table.dtype, jnp.floating) and table.dtype.itemsize == 1:\n"
        "        # 8-bit floats are bfloat16 values exactly; most TPUs' MXUs take no 8-bit float operands\n"
        "        return _one_hot_rows(one_hot, table.astype(jnp.bfloat16)).astype(table.dtype)\n"
        "    if jnp.issubdtype(table.dtype, jnp.floating):\n"
        "        wide = table.astype(jnp.float32)  # the TPU classifies f32 values only\n"
        "        finite = jnp.isfinite(wide)\n"
        "        pick, values = one_hot.astype(table.dtype), jnp.where(finite, table, 0)\n"
        "        if table.dtype.itemsize == 2:\n"
        "            out = jnp.dot(pick, values, preferred_element_type=jnp.float32).astype(table.dtype)\n"
        "        else:\n"
        "            out = dot(pick, values).astype(table.dtype)\n"
        "        code = jnp.where(finite, 0, jnp.where(jnp.isnan(wide), 3, jnp.where(wide > 0, 1, 2)))\n"
        "        kind = jnp.dot(one_hot.astype(jnp.bfloat16), code.astype(jnp.bfloat16), preferred_element_type=jnp.float32)\n"
        "        special = jnp.where(kind == 1, jnp.inf, jnp.where(kind == 2, -jnp.inf, jnp.nan)).astype(table.dtype)\n"
        "        return jnp.where(kind == 0, out, special)\n"
        "    wide = table.astype(jnp.int32)\n"
        "    pick = one_hot.astype(jnp.float32)\n"
        "    high = dot(pick, (wide >> 16).astype(jnp.float32)).astype(jnp.int32)\n"
        "    low = dot(pick, (wide & 0xFFFF).astype(jnp.float32)).astype(jnp.int32)\n"
        "    return ((high << 16) | low).astype(table.dtype)\n"
    ),
}
HELPER_DEPS = {"gather": ("one_hot_rows",), "gather_chunked": ("gather", "one_hot_rows"), "scatter": ("one_hot_rows",), "last_writer": ("one_hot_rows",)}


ONE_HOT_ELEMENTS = 1 << 18  # the most a gather's one-hot holds at once (positions x table rows; see gather_chunk)


def gather_chunk(block: tuple[int, ...], positions: int, dtype: torch.dtype, bound: int = ONE_HOT_ELEMENTS) -> int | None:
    """The rows of the table `_gather_chunked` takes at a time for a gather of `positions` from a whole block of
    shape `block` along its first dim, or None to take the whole table at once. libtpu 0.0.42 for v5e compiled
    upstream jagged_mean at its test's shapes (2,048 positions of an 8,448-element table: a 17M-element one-hot)
    for over 300 s, and in 9.4 s by chunks of 128 rows (8.0 s without the gather; 24 s by 384, 79 s by 1,408):
    its time grows with the one-hot's size. A chunk starts at a multiple of itself, so it divides the rows and is
    a multiple of what Mosaic slices at a device-known start (128 lanes of a 1-D table, 8 or 32 rows)."""
    rows = block[0] if block else 0
    if positions * rows <= bound:
        return None
    align = LANES * max(1, 4 // dtype.itemsize) if len(block) == 1 else sublane_multiple(dtype)
    fits = [c for c in range(align, rows, align) if rows % c == 0]
    if not fits:
        return None
    small = [c for c in fits if positions * c <= bound]
    return max(small) if small else fits[0]


class IndexWriter:
    """Mixin of `KernelWriter`: needs layout, grid_names, loop_vars, strategy, ref() and helpers."""

    layout: CallLayout
    grid_names: dict[tuple[int, int], str]
    loop_vars: dict[tuple[int, int], str]
    strategy: dict[int, str]
    helpers: set[str]
    window_multiple: dict[tuple[int, int], int]  # device-bounded tile: what its window start is a multiple of

    def tile_begin(self, dim: TileDim, as_id: bool = False, first: bool = False) -> str:
        raise NotImplementedError

    def use_helper(self, name: str) -> None:
        self.helpers.add(name)
        self.helpers.update(HELPER_DEPS.get(name, ()))

    def index_text(self, op: OperandLayout, node: Load | Store) -> str:
        items = node.index
        shape = op.tensor.value.shape
        if op.memory == "smem":
            parts, d = [], 0
            for it in items:
                if it[0] != "newaxis":
                    parts.append(self._position(it, shape[d], isinstance(node, Load)))
                    d += 1
            return ", ".join(parts)
        parts = [text for text, _ in self.index_parts(op, node)]
        if all(p == ":" for p in parts):
            return "..."
        return ", ".join(parts)

    def index_parts(self, op: OperandLayout, node: Load | Store) -> list[tuple[str, bool]]:
        """The subscript of each dim of the block as the kernel sees it (squeezed dims dropped), and whether
        it picks one position (that dim is then dropped from the value)."""
        shape = op.tensor.value.shape
        parts = []
        for d, it, mode, picks in kept_dims(node.index, self.layout.modes[id(node)]):
            if mode == "block":
                parts.append((":", False))
            elif mode == "sliced":
                parts.append((self._sliced(it, shape[d], isinstance(node, Load)), picks))
            else:  # a group: the block is the aligned group of rows (or lanes) holding the position
                parts.append((f"({self._position(it, shape[d], True)}) % {op.block_shape[d]}", True))
        return parts

    def read(self, op: OperandLayout, ref: str, node: Load | Store) -> str:
        """A read of `ref`. A position picked by a dynamic index along the lanes, or along the rows of a value
        narrower than 32 bits, is taken out of its rows with a mask (TPUs address neither at a start not proven
        aligned); a window at a start not provably aligned is gathered (see the module docstring)."""
        if op.memory == "smem":
            return f"{ref}[{self.index_text(op, node)}]"
        window = self._window_part(op, node)
        masked = self._masked_picks(op, node)
        if window is None and not masked:
            return f"{ref}[{self.index_text(op, node)}]"
        parts = self.index_parts(op, node)
        text = [":" if p in masked or (window and p == window[0]) else t for p, (t, _) in enumerate(parts)]
        subscript = "..." if set(text) == {":"} else ", ".join(text)
        value = f"{ref}[{subscript}]" if not masked else self._mask_out(op, f"{ref}[{subscript}]", parts, masked)
        if window is None:
            return value
        p, positions = window
        self.use_helper("gather")
        return f"_gather({value}, {positions}, axis={sum(not picks for _, picks in parts[:p])})"

    def _mask_out(self, op: OperandLayout, value: str, parts: list[tuple[str, bool]], masked: dict[int, str]) -> str:
        """`value` (the block read with the masked parts whole) with each masked part's position taken out: a
        sum of the one selected row (or lane) under a mask."""
        mask, axes = self._mask(op, parts, masked)
        dtype = op.tensor.value.dtype
        axis = str(axes[0]) if len(axes) == 1 else f"({', '.join(map(str, axes))})"
        if dtype == torch.bool:
            return f"jnp.any(jnp.where({mask}, {value}, False), axis={axis})"
        if dtype.itemsize < 4 and (all(picks for _, picks in parts) or not dtype.is_floating_point):
            # Mosaic takes a scalar out of 32-bit vectors only, and reduces no 8-bit integers: sum in 32 bits
            wide = "jnp.float32" if dtype.is_floating_point else "jnp.int32"
            return f"jnp.sum(jnp.where({mask}, {value}.astype({wide}), 0), axis={axis}).astype({dtype_text(dtype)})"
        return f"jnp.sum(jnp.where({mask}, {value}, 0), axis={axis}, dtype={dtype_text(dtype)})"

    def masked_write(self, op: OperandLayout, ref: str, node: Store, value: str) -> tuple[str, str] | None:
        """(the subscript, the merged block) of a store of one row picked by a masked position (see
        `_masked_picks`): the row goes into its block dim under the mask, the other rows keep their values.
        None when no row is masked (one lane alone the caller merges into its row)."""
        masked = self._masked_picks(op, node) if op.memory != "smem" else {}
        parts = self.index_parts(op, node)
        if not any(p != len(parts) - 1 for p in masked):
            return None
        text = [":" if p in masked else t for p, (t, _) in enumerate(parts)]
        subscript = "..." if set(text) == {":"} else ", ".join(text)
        mask, axes = self._mask(op, parts, masked)
        grown = f"jnp.expand_dims({value}, {axes[0] if len(axes) == 1 else tuple(axes)})"
        return subscript, f"jnp.where({mask}, {grown}, {ref}[{subscript}])"

    def _mask(self, op: OperandLayout, parts: list[tuple[str, bool]], masked: dict[int, str]) -> tuple[str, list[int]]:
        """The mask that selects each masked part's position in the block read with those parts whole, and the
        axes (counted from the end) of those parts in it."""
        lane = len(parts) - 1
        lane_kept = lane in masked or not parts[lane][1]  # the read value ends with the lane dim
        visible = op.block_dims_visible()
        conditions, axes = [], []
        for p in sorted(masked):
            shape = f"({visible[p]},)" if p == lane or not lane_kept else f"({visible[p]}, 1)"
            conditions.append(f"(jax.lax.broadcasted_iota(jnp.int32, {shape}, 0) == {masked[p]})")
            axes.append(-1 if p == lane or not lane_kept else -2)
        return " & ".join(conditions), axes

    def _masked_picks(self, op: OperandLayout, node: Load | Store) -> dict[int, str]:
        """Parts of the read (see `index_parts`) that pick one position the kernel masks out of the whole block
        dim (`placement.masks_pick`), with that position: a device-known position on the lane or row dim."""
        parts = self.index_parts(op, node)
        items = [it for _, it, _, _ in kept_dims(node.index, self.layout.modes[id(node)])]
        out: dict[int, str] = {}
        if len(parts) != len(op.block_dims_visible()):
            return out
        for p in range(max(0, len(parts) - 2), len(parts)):
            text, picks = parts[p]
            it, lane = items[p], p == len(parts) - 1
            static = it[0] == "scalar" and self._static(it[1])
            if picks and it[0] in DEVICE_POSITIONS and (lane or not static) and \
                    masks_pick(lane, op.tensor.value.dtype, parts[-1][1]):
                out[p] = text
        return out

    def unaligned_window(self, op: OperandLayout, node: Load | Store) -> tuple[str, int, str] | None:
        """(the subscript with that dim whole, the dim's axis in what it reads, the window's positions) when the
        access has a window along one of the ref's last two dims whose start is known only on the device and not
        proven a multiple of that dim's tiling; None when Mosaic can address it as it is."""
        window = self._window_part(op, node)
        if window is None:
            return None
        p, positions = window
        parts = self.index_parts(op, node)
        row = [t for t, _ in parts]
        row[p] = ":"
        axis = sum(not picks for _, picks in parts[:p])
        return ("..." if set(row) == {":"} else ", ".join(row)), axis, positions

    def _window_part(self, op: OperandLayout, node: Load | Store) -> tuple[int, str] | None:
        """(the part of the read, see `index_parts`, the window's positions) of `unaligned_window`'s window."""
        if op.memory == "smem":
            return None
        shape = op.tensor.value.shape
        parts = self.index_parts(op, node)
        kept = kept_dims(node.index, self.layout.modes[id(node)])  # one per part
        if parts and parts[-1][1]:
            return None  # a single lane picked on the last dim: read() masks it out of its row
        for p in range(max(0, len(parts) - 2), len(parts)):
            d, it, mode, _ = kept[p]
            start = None if mode == "block" else self._dynamic_start(it, shape[d])
            if start is None:
                continue
            text, count, multiple = start
            lanes = p == len(parts) - 1
            need = LANES if lanes else sublane_multiple(op.tensor.value.dtype)
            if multiple % need == 0 or count >= shape[d]:  # a window as long as the dim can only start at 0
                continue
            if not lanes and op.tensor.value.dtype.itemsize == 4 and op.block_dims_visible()[-1] <= LANES:
                continue  # rows of 32 bits in one lane tile: Mosaic shifts them itself (libtpu 0.0.42, v5e)
            return p, f"{text} + jax.lax.broadcasted_iota(jnp.int32, ({count},), 0)"
        return None

    def _dynamic_start(self, it: tuple, size: int) -> tuple[str, int, int] | None:
        """(start, size, a number the start is a multiple of; 0: always 0) of a stride-1 window whose start is
        known only on the device; None for a window placed when the kernel is traced and for other items."""
        if it[0] == "tile":
            td: TileDim = it[1]
            if td.dynamic:
                return self.tile_begin(td), td.block_size, self.window_multiple.get((td.loop_id, td.axis), 1)
            if self._unrolled(td):
                return None
            return self._tile_start(td), td.block_size, math.gcd(td.block_size, td.begin)
        if it[0] != "window" or isinstance(it[1], int) or it[3] != 1:
            return None
        start, count = it[1], it[2]
        if self._static(start):
            return None
        text, multiple = self._window_start(start, count, size)
        return text, count, multiple

    def _static(self, v: Value) -> bool:
        """Is the scalar a Python int when the kernel is traced (constants and unrolled loop positions only)?"""
        dims: list[TileDim] = []
        return ix.render(v, lambda d, _what: dims.append(d) or "p") is not None and all(map(self._unrolled, dims))

    def _unrolled(self, td: TileDim) -> bool:
        """Is the tile's position a Python int when the kernel is traced (an unrolled inner loop)?"""
        key = (td.loop_id, td.axis)
        return not td.dynamic and key not in self.grid_names and self.strategy.get(td.loop_id) == "unroll"

    def spilling_tiles(self, op: OperandLayout, node: Store) -> list[tuple[int, TileDim]]:
        """(axis in the stored region, tile) for partial tiles whose padding would land on valid elements."""
        out = []
        axis = 0
        d = 0
        for it in node.index:
            if it[0] == "newaxis":
                continue
            if it[0] == "tile" and outputs.spills(it[1], op.tensor.value.shape[d]):
                out.append((axis, it[1]))
            if it[0] in ("tile", "full", "window"):
                axis += 1
            elif it[0] == "gather":
                axis += len(it[1].shape)
            d += 1
        return out

    @staticmethod
    def store_lanes(node: Store, td: TileDim) -> tuple[int, ...] | None:
        """The axes of a stored region along jagged tile `td`'s lane tiles (None for other tiles)."""
        if not td.jagged:
            return None
        axes: dict[TileDim, int] = {}
        axis = 0
        for it in node.index:
            if it[0] in ("tile", "full", "window"):
                if it[0] == "tile":
                    axes[it[1]] = axis
                axis += 1
            elif it[0] == "gather":
                axis += len(it[1].shape)
        missing = [lane for lane in td.lane_dims if lane not in axes]
        if missing:
            raise UserError("HPL106", f"a store along jagged tile `{td.name}` must index `{missing[0].name}` too, "
                                      f"whose lanes give its ends (`out[{missing[0].name}, {td.name}]`)", node.range)
        return tuple(axes[lane] for lane in td.lane_dims)

    def _var(self, td: TileDim) -> str:
        key = (td.loop_id, td.axis)
        return self.grid_names.get(key) or self.loop_vars[key]

    def _position(self, it: tuple, size: int, load: bool = False) -> str:
        """One position (dim dropped): an int, an hl.grid index, tile.id or a computed scalar.

        A read at an hl.grid index or tile.id that may leave the dim (a loop longer than the dim, or one whose
        trip count is read on the device: `indices[..., blk.id]` under `hl.tile(num_blocks[...])`) is kept
        inside it like a computed position: a dim of size 1 gives its only element (Helion drops a size-1
        dim's offset; a flex-attention block mask made for one block broadcasts), never a read past the ref."""
        if it[0] == "int":
            return str(it[1])
        if it[0] == "scalar":
            return self._scalar(it[1], size)
        td: TileDim = it[1]
        var = self._var(td)
        text = var if it[0] == "id" or not td.begin else f"{var} + {td.begin}"
        lo, hi = (0, td.steps - 1) if it[0] == "id" else (td.begin, td.extent - 1)
        if not load or (not td.dynamic and 0 <= lo and hi < size):
            return text
        if size == 1:
            return "0"
        self.use_helper("wrap_index")
        return f"_wrap_index({text}, {size})"

    def _scalar(self, v: Value, size: int) -> str:
        text, atomic = self.ref(v)
        b = ix.bounds(v)
        if b is not None and 0 <= b[0] and b[1] < size:
            return text
        if b is not None and -size <= b[0] and b[1] < size:
            return f"{text if atomic else '(' + text + ')'} % {size}"
        self.use_helper("wrap_index")
        return f"_wrap_index({text}, {size})"

    def _sliced(self, it: tuple, size: int, load: bool = False) -> str:
        kind = it[0]
        if kind in ("full", "gather"):
            return ":"
        if kind == "tile":
            td: TileDim = it[1]
            if td.dynamic:
                return f"pl.ds({self.tile_begin(td)}, {td.block_size})"
            if td.block_size >= size and not td.begin:
                return ":"  # a window as long as the dim can only start at 0 (Mosaic cannot prove a traced start is)
            start = self._tile_start(td)
            if self.strategy.get(td.loop_id) == "fori_loop" and not td.begin:
                start = f"pl.multiple_of({start}, {td.block_size})"
            return f"pl.ds({start}, {td.block_size})"
        if kind == "window":
            return self._window(it[1], it[2], it[3], size)
        return self._position(it, size, load)

    def _tile_start(self, td: TileDim) -> str:
        """Where a tile's block starts in the dim it slices (a multiple of gcd(block size, begin))."""
        return f"{self._var(td)} * {td.block_size}" + (f" + {td.begin}" if td.begin else "")

    def _window(self, start: object, count: int, step: int, size: int) -> str:
        span = (count - 1) * step + 1
        if isinstance(start, int):
            if step == 1:
                return f"{start}:{start + count}"
            return f"pl.ds({start}, {count}, stride={step})"
        text, _ = self._window_start(start, span, size)
        return f"pl.ds({text}, {count})" if step == 1 else f"pl.ds({text}, {count}, stride={step})"

    def _window_start(self, start: Value, span: int, size: int) -> tuple[str, int]:
        """A computed window start, clamped so the `span` positions it reads stay inside `size`, and a number it
        is a multiple of (0: always 0; the clamp's bound counts: a clamped start is that bound)."""
        text, _ = self.ref(start)
        m = ix.multiple(start)
        b = ix.bounds(start)
        if b is None or b[0] < 0 or b[1] + span > size:
            text = f"jnp.clip({text}, 0, {size - span})"
            m = math.gcd(m, size - span)
        if m > 1 and m % 8 == 0 and not self._static(start):  # a hint on a Python int would make it a traced value
            text = f"pl.multiple_of({text}, {m})"
        return text, m

    def gather_axis(self, op: OperandLayout, node: Load | Store) -> tuple[int, Value] | None:
        """(position of the gathered dim in the ref read, the index tensor) for a tensor-indexed access."""
        modes = self.layout.modes.get(id(node))
        axis = 0
        d = 0
        for it in node.index:
            if it[0] == "newaxis":
                continue
            if it[0] == "gather":
                return axis, it[1]
            kept = modes is not None and (modes[d] == "block" or (modes[d] == "sliced" and it[0] in ("full", "tile",
                                                                                                       "window")))
            axis += kept
            d += 1
        return None
