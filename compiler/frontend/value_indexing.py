"""Indexing a computed value: static ints, slices and None become a value slice; in host code, tensors as
indices are torch advanced indexing (`host_take`, `host_put`); anything else re-reads the tensor the value
was loaded from (composed_reads.py).

`ValueIndexing` is mixed into `Indexer` (indexing.py); it needs from it: ops, compose (composed_reads.py)
and the position arithmetic of positions.py.
"""

from __future__ import annotations

from typing import Any

import torch

from ..ir.tile_ir import Load, Value
from ..support.diagnostics import Range, UserError
from .composed_reads import counts_from_tile_end
from .positions import const, int_value, is_int
from .values import Tile, TileId


class ValueIndexing:
    """`value[index]` of a computed value (or of a host tensor in host code)."""

    def index_value(self, base: Value, index: Any, rng: Range) -> Value:
        entries = list(index) if isinstance(index, tuple) else [index]
        entries = [const(e) for e in entries]
        if base.space == "host" and any(isinstance(e, Value) for e in entries):
            return self.host_take(base, entries, rng)
        if entries.count(Ellipsis) > 1:
            raise UserError("HPL202", "only one `...` is allowed in an index", rng)
        real = [e for e in entries if e is not None and e is not Ellipsis]
        ndim = len(base.shape)
        if len(real) > ndim:
            raise UserError("HPL105", f"too many indices for a {ndim}-d value", rng)
        if Ellipsis in entries:
            at = entries.index(Ellipsis)
            entries[at:at + 1] = [slice(None)] * (ndim - len(real))
        for e in entries:
            if isinstance(e, Tile | TileId):
                raise UserError("HPL202", "a tile indexes tensors, not computed values; use tile.index - tile.begin "
                                          "positions or index the tensor itself", rng)
        from_end = counts_from_tile_end(base, entries, rng)
        static = None if from_end else self._static_items(base, entries, rng)
        if static is not None:
            return self.ops.index(base, tuple(static), rng)
        load = base.producer
        if not isinstance(load, Load):
            raise UserError("HPL202", "a value computed on the device can only be indexed by positions known at "
                                      "compile time; index the tensor it was loaded from instead", rng)
        return self.compose(load, entries, rng)

    def host_take(self, base: Value, entries: list, rng: Range) -> Value:
        """`x[idx]` in host code (wrapper code around the loops): torch advanced indexing, as jnp does it."""
        for e in entries:
            if isinstance(e, Value) and (e.space != "host" or e.dtype.is_floating_point):
                raise UserError("HPL202", "host code can index a tensor with integer or boolean host tensors only", rng)
            if isinstance(e, Value) and e.dtype == torch.bool:
                raise UserError("HPL202", "boolean-mask indexing has no static shape; use torch.where", rng)
        return self.ops.make("take", (base, tuple(entries)), {}, lambda t, items: t[items], rng, space="host")

    def host_put(self, base: Value, index: Any, value: Any, rng: Range) -> Value:
        """`x[idx] = v` in host code: a new array with those positions replaced (the caller rebinds the name)."""
        entries = [const(e) for e in (list(index) if isinstance(index, tuple) else [index])]
        if any(isinstance(e, Value) and (e.space != "host" or e.dtype.is_floating_point) for e in entries):
            raise UserError("HPL202", "host code can index a tensor with integer host tensors only", rng)
        if isinstance(value, Value) and value.space != "host":
            raise UserError("HPL101", "the stored value must be a host tensor", rng)

        def meta(t, items, v):
            out = t.clone()
            out[items] = v
            return out

        return self.ops.make("index_put", (base, tuple(entries), value), {}, meta, rng, space="host")

    def _static_items(self, base: Value, entries: list, rng: Range) -> list | None:
        """The entries as ints and slices when none is computed on the device (else None)."""
        out: list[Any] = []
        dim = 0
        for e in entries:
            if e is None:
                out.append(None)
                continue
            size = base.shape[dim]
            dim += 1
            if isinstance(e, slice):
                if any(p is not None and not is_int(p) for p in (e.start, e.stop, e.step)):
                    return None
                item = self._slice_item(size, e, rng)
                out.append(slice(None) if item[0] == "full" else slice(item[1], item[1] + (item[2] - 1) * item[3] + 1,
                                                                          item[3]))
            elif is_int(e):
                if not -size <= e < size:
                    raise UserError("HPL105", f"index {e} is out of range for size {size}", rng)
                out.append(e % size)
            elif isinstance(e, Value) and int_value(e) and len(e.shape) == 1:
                run = self.run(e, rng)
                if run is None or not is_int(run[0]) or run[2] <= 0:
                    return None
                item = self.window(size, run, rng)
                out.append(slice(None) if item[0] == "full" else slice(item[1], item[1] + (item[2] - 1) * item[3] + 1,
                                                                          item[3]))
            elif isinstance(e, Value):
                if e.dtype == torch.bool:
                    raise UserError("HPL202", "boolean-mask indexing has no static shape; use torch.where", rng)
                if e.dtype.is_floating_point:
                    raise UserError("HPL105", f"tensors used as indices must be integers, not {e.dtype}", rng)
                return None
            else:
                raise UserError("HPL202", f"cannot index a computed value with `{type(e).__name__}`", rng)
        return out
