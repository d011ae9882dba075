"""Loads and stores of host tensors in a kernel body (tracer.py): `x[index]` in device code becomes a `Load`,
`x[index] = v` a `Store` (host code rebinds an allocated buffer instead), with the checks every access
passes (32-bit positions, no 64-bit vectors, positions of a device-bounded tile); views made once in host
code before the grid loop (row views, split views) stand in for the tensor where an access needs them.

`TensorAccess` is mixed into `Tracer`; it needs from it: tensors, host, host_views, region, loops, loads,
env, predicate, ops, indexer, eval/binop (expressions.py), in_device.
"""

from __future__ import annotations

import ast
from typing import Any

import torch

from ..ir.tile_ir import HostTensor, Load, Op, Store, TileDim, Value
from ..support.diagnostics import Range, UserError
from .broadcast_index import outer_access
from .fast_types import broadcast_shapes
from .index_exprs import device_tile_positions
from .ops import int64_grown_error
from .outer_tiles import outer_tiles
from .row_views import single_row_view, use_rows
from .split_index import split_view
from .values import NamedConst, Tile


class TensorAccess:
    """Turns subscripts of host tensors into loads and stores."""

    def host_tensor(self, value: Value, rng: Range) -> HostTensor:
        ht = self.tensors.get(value.id)
        if ht is not None:
            return ht
        prod = value.producer
        if isinstance(prod, Op) and prod.kind == "alloc":
            ht = HostTensor(value, value.hint or "buf", "alloc", prod.kwargs["init"], prod.kwargs.get("value", 0.0))
        elif isinstance(prod, Op) and prod.kind == "clone":
            ht = HostTensor(value, value.hint or "buf", "alloc", "copy")
        else:
            ht = HostTensor(value, value.hint or "t", "derived")
        self.tensors[value.id] = ht
        return ht

    def _view_base(self, value: Value, rng: Range) -> HostTensor | None:
        """The argument or allocation `value` reshapes, when it is a chain of reshapes of one."""
        prod = value.producer
        if not (isinstance(prod, Op) and prod.kind == "reshape" and isinstance(prod.args[0], Value)):
            return None
        source = prod.args[0]
        ht = self.host_tensor(source, rng)
        if ht.origin in ("arg", "alloc"):
            return ht
        return self._view_base(source, rng)

    def load(self, tensor: Value, index: Any, rng: Range, prepared: bool = False) -> Value:
        """`tensor[index]` in device code; `prepared`: index is already a tuple of IR index items."""
        outer = None if prepared else outer_tiles(list(index) if isinstance(index, tuple | list) else [index],
                                                  len(tensor.shape), self.indexer.exact_tile)
        if outer is not None:  # tiles' positions broadcast against each other: the block, permuted
            tiles, dims = outer
            block = self.load(tensor, tuple(Tile(d) for d in tiles), rng)
            return block if dims == tuple(range(len(dims))) else self.ops.permute(block, dims, rng)
        split = None if prepared else split_view(self, tensor, index, rng, for_store=False)
        outer = None if prepared or split is not None else outer_access(self.indexer, tensor, index, rng)
        if outer is not None:
            return outer.after_load(self.indexer, self.load(tensor, outer.index, rng), rng)
        if split is not None:
            tensor, index, prepared = *split, True
        ht = self.host_tensor(tensor, rng)
        _no_64_bit(ht, rng, written=False)
        _positions_fit(ht, rng)
        items = index if prepared else self.indexer.items(tensor, index, rng)
        _no_device_tile_runs(items, rng)
        shape = self.indexer.shape(tuple(tensor.shape), items)
        tensor, items = self._as_rows(tensor, items, rng)
        ht = self.host_tensor(tensor, rng)
        dtype = torch.int32 if tensor.dtype == torch.int64 else tensor.dtype  # read as int32 (see _no_64_bit)
        out = Value(torch.empty(shape, dtype=dtype, device="meta"), "device",
                    from_int64="read" if tensor.dtype == torch.int64 else "")
        node = Load(rng, ht, items, out)
        out.producer = node
        self.region.append(node)
        self.loads.append(node)
        return out

    def _as_rows(self, tensor: Value, items: tuple, rng: Range, store: bool = False) -> tuple[Value, tuple]:
        """`x[tile]` of a small 1-D tensor with a block too short for a rank-1 block (or `x[sub]` of a sub-tile
        that is its grid tile's one block: upstream layer_norm_bwd's `mean[mb]`): row `tile.id` of its
        [n / block, block] view (compiler/frontend/row_views.py); a launch-grid tile of one row on the
        second-to-last dim (`hl.tile(tokens, block_size=1)`): row `tile.id` of the [..., n, 1, m] view, a block
        Mosaic accepts ((1, m) of [n, m] is not); otherwise the access as it is."""
        if not tensor.shape:  # a 0-d tensor: its [1] view (Mosaic has no rank-0 blocks), element 0 when read
            return self.host_view(tensor, (1,), "1d", rng), (("full",),) if store else (("int", 0),)
        if len(tensor.shape) >= 2:
            return single_row_view(self, tensor, items, rng)
        if len(tensor.shape) != 1 or len(items) != 1 or items[0][0] != "tile":
            return tensor, items
        d: TileDim = items[0][1]
        if d.parent is not None and d.block_size == d.parent.block_size and d.steps == 1 and not d.begin \
                and not d.dynamic:
            d = d.parent  # `hl.tile(t.begin, t.end)` in one block of t's size: that block is t's own
        n, b = tensor.shape[0], d.block_size
        if d.dynamic or d.parent is not None or d.begin or d.extent != n or not use_rows(n, b, tensor.dtype.itemsize):
            return tensor, items
        known = (tensor.id, (n // b, b), "rows") in self.host_views
        view = self.host_view(tensor, (n // b, b), "rows", rng)
        if not known:
            self.host_tensor(view, rng).rows = True
        return view, (("id", d), ("full",))

    def host_view(self, tensor: Value, shape: tuple[int, ...], suffix: str, rng: Range) -> Value:
        """`tensor.reshape(shape)`, made once in host code before the current grid loop (`x_rows`, `x_split`)."""
        key = (tensor.id, tuple(shape), suffix)
        view = self.host_views.get(key)
        if view is None:
            before, self.region = self.region, []
            try:
                view = self.ops.reshape(tensor, tuple(shape), rng)
                made = self.region
            finally:
                self.region = before
            at = self.host.index(self.loops[0])
            self.host[at:at] = made
            view.hint = f"{self.host_tensor(tensor, rng).name}_{suffix}"
            self.host_views[key] = view
        return view

    def store(self, target: ast.Subscript, value: Any, accumulate: str | None, rng: Range) -> None:
        base = self.eval(target.value)
        if not self.in_device and isinstance(base, Value) and base.space == "host":
            self._host_store(target, base, value, accumulate, rng)
            return
        self.store_at(base, self.eval(target.slice), value, accumulate, rng)

    def _host_store(self, target: ast.Subscript, base: Value, value: Any, accumulate: str | None, rng: Range) -> None:
        """`buf[idx] = v` in host code: jax arrays are values, so the name is rebound to the updated array.
        Only a buffer the kernel allocated and no other name refers to can be updated this way."""
        ht = self.tensors.get(base.id)
        names = [k for k, v in self.env.items() if v is base]
        if not isinstance(target.value, ast.Name) or (ht is not None and ht.origin == "arg") or len(names) != 1:
            raise UserError("HPL101", "host code can only write into a tensor it allocated, through its own name; "
                                      "write kernel arguments inside an hl.tile loop", rng)
        index = self.eval(target.slice)
        if accumulate:
            value = self.binop(accumulate, self.indexer.index_value(base, index, rng), value, rng)
        new = self.indexer.host_put(base, index, value, rng)
        new.hint = target.value.id
        self.env[target.value.id] = new

    def store_at(self, base: Any, index: Any, value: Any, accumulate: str | None, rng: Range) -> None:
        """`base[index] = value` (or `op=` with `accumulate`) in device code."""
        if not isinstance(base, Value) or base.space != "host":
            raise UserError("HPL101", "stores must write into a host tensor (a kernel argument or allocation)", rng)
        if not self.in_device:
            raise UserError("HPL101", "host code cannot write into tensors; do it inside an hl.tile loop", rng)
        split = split_view(self, base, index, rng, for_store=True)
        outer = outer_access(self.indexer, base, index, rng) if split is None else None
        if outer is not None:
            index = outer.index
        if split is not None:
            base, index = split
        ht = self.host_tensor(base, rng)
        if ht.origin == "derived":
            root = self._view_base(base, rng)
            if root is None:
                raise UserError("HPL101", f"cannot store into `{ht.name}`: only views (.view / .reshape) of a kernel "
                                          "argument or allocation can be written", rng)
            ht.origin, ht.base = "view", root
        _no_64_bit(ht, rng, written=True)
        _positions_fit(ht, rng)
        items = index if split is not None else self.indexer.items(base, index, rng, for_store=True)
        _no_device_tile_runs(items, rng)
        if any(it[0] == "newaxis" for it in items):
            raise UserError("HPL202", "`None` is not allowed in a store index", rng)
        block = self.indexer.shape(tuple(base.shape), items)
        rows, items = self._as_rows(base, items, rng, store=True)
        if rows is not base:
            ht = self.host_tensor(rows, rng)
            ht.origin, ht.base = "view", self._view_base(rows, rng)
        if outer is not None:
            value = outer.before_store(self.indexer, value, tuple(block), rng)
        if not isinstance(value, Value):
            value = self.ops.full(tuple(block), _scalar(value), base.dtype, rng)
        if value.space != "device":
            raise UserError("HPL101", "the stored value must be computed in device code", rng)
        if value.from_int64 == "grown" and base.dtype != torch.int32:
            raise int64_grown_error("a store into a " + str(base.dtype).removeprefix("torch.") + " tensor", rng)
        if len(value.shape) > len(block) or broadcast_shapes(tuple(value.shape), tuple(block)) != tuple(block):
            raise UserError("HPL105", f"cannot store a value of shape {list(value.shape)} into a block of shape {block}", rng)
        if rows is not base:
            _no_64_bit(ht, rng, written=True)
        self.region.append(Store(rng, ht, items, value, accumulate, self.predicate))


def _scalar(v: Any) -> Any:
    return v.value if isinstance(v, NamedConst) else v


def _no_device_tile_runs(items: tuple, rng: Range) -> None:
    """Positions made from a device-bounded tile's `tile.index` must index as the tile itself (see
    `index_exprs.device_tile_positions`) or gather (the gathered dims carry the positions' tile, so compiler/frontend/masks.py
    masks them); a window would read unmasked rows, so it is refused."""
    for it in items:
        if it[0] == "window":
            d = device_tile_positions(it[1])
            if d is not None:
                raise UserError("HPL106", f"positions computed from `{d.name}.index` (a loop whose bounds are computed "
                                          f"on the device) can only index a tensor as the tile itself, "
                                          f"`x[{d.name}, ...]`, not shifted, scaled or through a loaded block", rng)


INT32_MAX = 2**31 - 1


def _positions_fit(ht: HostTensor, rng: Range) -> None:
    """Positions are 32-bit integers on the TPU: a tensor dim of more than 2**31 elements cannot be addressed
    (jax itself would fail on the first constant of that size)."""
    for d, size in enumerate(ht.value.shape):
        if size > INT32_MAX + 1:
            raise UserError("HPL202", f"dim {d} of `{ht.name}` has {size} elements: positions on the TPU are 32-bit "
                                      f"integers (at most {INT32_MAX}); index it through more dims (`x[row, col]` "
                                      "rather than a flattened view)", rng)


def _no_64_bit(ht: HostTensor, rng: Range, written: bool) -> None:
    """TPUs have no 64-bit vector types. An int64 tensor the device only reads (offsets, indices) is read as
    int32: the call narrows it after checking that every value fits (`runtime.to_jax`), as jax does without
    x64 but never wrapping. A 64-bit tensor written on the device, and any float64 one, is refused (as
    upstream Helion's Pallas backend does): narrowing would change what the kernel returns."""
    value = ht.root.value
    dtype = value.dtype
    if value.wide:  # made by the kernel: torch would make it 64-bit, the TPU holds it in 32 bits
        dtype = torch.int64 if not dtype.is_floating_point else torch.float64
    if dtype == torch.int64 and not written:
        return
    if dtype in (torch.int64, torch.float64):
        narrow = "torch.int32" if dtype == torch.int64 else "torch.float32"
        what = "written on the device" if written else "read on the device"
        where = "before the call" if ht.root.origin == "arg" else "where it is made"
        raise UserError("HPL108", f"`{ht.root.name}` is {str(dtype).removeprefix('torch.')} and {what}: TPUs have no "
                                  f"64-bit vector types; make it {narrow} ({where})", rng)
