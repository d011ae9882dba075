"""Calls of `helion.language` (`hl.*`) in a kernel: sizes (cdiv, register_block_size, ...), loops (as
loop_specs.py specs), blocks (zeros, full, arange), hl.load/hl.store (indexing.py), hl.dot, hl.rand,
scans (hl.cumsum/hl.cumprod, hl.associative_scan, hl.reduce: scans.py), atomics, split/join (pairs.py) and tunables.

`HelionCalls` is mixed into `Dispatcher` (dispatch.py); it needs from it: t (the tracer), ops.
"""

from __future__ import annotations

from typing import Any

import torch

from ..ir.tile_ir import Value
from ..support.diagnostics import Range, UserError
from . import pairs
from .jagged import jagged_spec
from .loop_specs import loop_spec
from .scans import associative_scan, cumulative, reduce
from .static_args import as_int, shape_arg, shape_tiles, unwrap
from .tunables import tunable_value
from .values import BlockSize, StaticRange, Tile

RAND_MIX = (1, -1640531535, -2048144777, -1028477379)  # hl.rand counter: per-dim odd multipliers (int32), last dim first
ATOMICS = {"atomic_add": "add", "atomic_max": "maximum", "atomic_min": "minimum", "atomic_and": "and",
           "atomic_or": "or", "atomic_xor": "xor", "atomic_xchg": None, "atomic_cas": None}
FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
STATIC_STEPS = 64  # the most copies of a body hl.static_range unrolls


class HelionCalls:
    """`hl.<name>(...)`."""

    def hl(self, name: str, args: list, kwargs: dict, rng: Range) -> Any:
        if name == "cdiv":
            if any(isinstance(unwrap(x), Value) for x in args[:2]) and len(args) >= 2:
                # upstream's cdiv is `(a + b - 1) // b`: on a device value (a loaded length) it is that arithmetic
                a, b = (unwrap(x) for x in args[:2])
                if not isinstance(b, Value) and as_int(b, "cdiv divisor", rng) == 0:
                    raise UserError("HPL105", "cdiv by zero", rng)
                return self.ops.binary("floordiv", self.ops.binary("sub", self.ops.binary("add", a, b, rng), 1, rng),
                                       b, rng)
            a, b = (as_int(x, "cdiv argument", rng) for x in args[:2])
            if b == 0:
                raise UserError("HPL105", "cdiv by zero", rng)
            return -(-a // b)
        if name == "next_power_of_2":
            n = as_int(args[0], "next_power_of_2 argument", rng)
            return 1 if n <= 1 else 1 << (n - 1).bit_length()
        if name == "specialize":
            v = unwrap(args[0]) if args else None
            if isinstance(v, tuple):
                return v
            return as_int(v, "hl.specialize argument", rng)
        if name == "register_block_size":
            if len(args) == 2:
                extent = as_int(args[1], "register_block_size max", rng)
            elif len(args) == 1:
                extent = as_int(args[0], "register_block_size argument", rng)
            else:
                raise UserError("HPL103", "hl.register_block_size(size) takes one size", rng)
            block = self.t.blocks.allocate(extent, rng)
            # a block past the extent covers it once (its tiles are cut to it): `hl.zeros([t, block])` must agree
            return BlockSize(min(int(block), extent), block.index) if 0 < extent < block else block
        if name in ("tile", "grid"):
            return loop_spec(name, args, kwargs, rng)
        if name == "static_range":  # unrolled by the trace (device_loops.py): as many copies as it has steps
            bounds = [as_int(a, "hl.static_range argument", rng) for a in args]
            if not 1 <= len(bounds) <= 3 or kwargs:
                raise UserError("HPL103", "hl.static_range(end) / hl.static_range(begin, end, step=1)", rng)
            items = range(*bounds)
            if len(items) > STATIC_STEPS:
                raise UserError("HPL105", f"hl.static_range of {len(items)} steps: at most {STATIC_STEPS} are "
                                          "unrolled (use hl.tile for a loop)", rng)
            return StaticRange(items)
        if name in ("split", "join"):
            self.t.used_pairs = True
            if name == "split":
                return pairs.split(self.ops, args[0] if args else None, rng)
            return pairs.join(self.ops, *(list(args) + [None, None])[:2], rng)
        if name == "register_tunable":
            fragment = kwargs.get("fragment", args[1] if len(args) > 1 else None)
            return tunable_value(unwrap(args[0]) if args else None, fragment, self.t.tunables, rng)
        if name == "barrier":  # grid loops run as separate pallas_calls, in program order: nothing to wait for
            if self.t.in_device:
                raise UserError("HPL101", "hl.barrier() belongs between grid loops, not inside one", rng)
            return None
        if name == "jagged_tile":
            return jagged_spec(self.ops, args, kwargs, rng)
        if name in ("zeros", "full"):
            if not args:
                raise UserError("HPL103", f"hl.{name}(shape, ...) needs a shape", rng)
            shape = shape_arg([args[0]], rng)
            value = 0.0 if name == "zeros" else unwrap(args[1] if len(args) > 1 else kwargs.get("value"))
            dtype = kwargs.get("dtype", args[2] if name == "full" and len(args) > 2 else
                               (args[1] if name == "zeros" and len(args) > 1 else torch.float32))
            if not isinstance(dtype, torch.dtype):
                raise UserError("HPL103", f"hl.{name}: dtype must be a torch dtype", rng)
            if not isinstance(value, int | float | bool):
                raise UserError("HPL106", f"hl.{name}: the fill value must be a number", rng)
            return self.ops.full(shape, value, dtype, rng, tiles=shape_tiles([args[0]]))
        if name == "arange":
            vals = [as_int(a, "hl.arange argument", rng) for a in args]
            if not 1 <= len(vals) <= 3:
                raise UserError("HPL103", "hl.arange(end) / hl.arange(start, end, step=1)", rng)
            start, end, step = (0, vals[0], 1) if len(vals) == 1 else (vals + [1])[:3]
            n = len(range(start, end, step))
            if step <= 0 or n == 0:
                raise UserError("HPL105", f"hl.arange({', '.join(map(str, vals))}) is empty", rng)
            dtype = kwargs.get("dtype", torch.int32)
            out = self.ops.arange(n, dtype, None, rng)
            if step != 1:
                out = self.ops.binary("mul", out, step, rng)
            return out if not start else self.ops.binary("add", out, start, rng)
        if name in ("load", "store"):
            return self.t.indexer.load_store(name, args, kwargs, rng)
        if name == "dot":
            if len(args) < 2:
                raise UserError("HPL103", "hl.dot(a, b, acc=None, out_dtype=None) needs two operands", rng)
            acc = kwargs.get("acc", args[2] if len(args) > 2 else None)
            out_dtype = kwargs.get("out_dtype", args[3] if len(args) > 3 else None)
            if out_dtype is None and acc is None and all(isinstance(a, Value) and a.dtype in FP8 for a in args[:2]):
                out_dtype = torch.float32  # Helion: an fp8 dot without acc= gives float32 (fp8 results never)
            return self.ops.dot(args[0], args[1], acc, out_dtype, rng)
        if name == "rand":
            return self.rand(args, kwargs, rng)
        if name in ("cumsum", "cumprod"):
            return cumulative(self, name, args, kwargs, rng)
        if name == "associative_scan":
            return associative_scan(self, args, kwargs, rng)
        if name == "reduce":
            return reduce(self, args, kwargs, rng)
        if name in ATOMICS:
            return self.atomic(name, args, kwargs, rng)
        raise UserError("HPL102", f"`hl.{name}` is not supported by the Pallas backend", rng)

    def rand(self, args: list, kwargs: dict, rng: Range) -> Value:
        """`hl.rand(shape, seed)`: each element hashes its global index, so the values do not depend on blocks."""
        if not args or ("seed" not in kwargs and len(args) < 2):
            raise UserError("HPL103", "hl.rand(shape, seed) needs a shape and a seed", rng)
        seed = kwargs["seed"] if "seed" in kwargs else args[1]
        if not (isinstance(unwrap(seed), int) and not isinstance(unwrap(seed), bool)) and not (
                isinstance(seed, Value) and not seed.shape and not seed.dtype.is_floating_point):
            raise UserError("HPL103", "hl.rand: the seed must be an integer", rng)
        entries = unwrap(args[0])
        entries = list(entries) if isinstance(entries, tuple | list) else [entries]
        if not 1 <= len(entries) <= len(RAND_MIX):
            raise UserError("HPL101", f"hl.rand supports 1 to {len(RAND_MIX)} dims", rng)
        parts = []
        for e in entries:
            if isinstance(e, Tile):  # the tile's global indices
                parts.append(self.ops.arange(e.dim.block_size, torch.int32, ("tile", e.dim), rng))
            else:
                parts.append(self.ops.arange(as_int(e, "an hl.rand size", rng), torch.int32, None, rng))
        index: Value | None = None
        for axis, part in enumerate(parts):  # one counter per element: sum of index * an odd constant per dim
            items = tuple(slice(None) if a == axis else None for a in range(len(parts)))
            term = self.ops.index(part, items, rng) if len(parts) > 1 else part
            mix = RAND_MIX[len(parts) - 1 - axis]
            term = term if mix == 1 else self.ops.binary("mul", term, mix, rng)
            index = term if index is None else self.ops.binary("add", index, term, rng)
        return self.ops.rand(index, seed, rng)

    def atomic(self, name: str, args: list, kwargs: dict, rng: Range) -> Value:
        """`hl.atomic_<op>(target, index, value)`: grid steps run one after another on a TPU core, so an atomic
        update is a read-modify-write of the target's block; it returns the old values like Helion."""
        want = 4 if name == "atomic_cas" else 3
        if len(args) < want - 1:
            raise UserError("HPL103", f"hl.{name}(target, index, value{', ' if want == 4 else ''}"
                                      f"{'expected' if want == 4 else ''}) needs more arguments", rng)
        target, index = args[0], args[1]
        values = list(args[2:want]) + [kwargs[k] for k in ("value", "cmp", "val") if k in kwargs]
        if not isinstance(target, Value) or target.space != "host" or not self.t.in_device:
            raise UserError("HPL101", f"hl.{name} updates a host tensor inside a device loop", rng)
        index = tuple(index) if isinstance(index, list) else index
        old = self.t.load(target, index, rng)
        scattered = any(it[0] == "gather" for it in old.producer.index)
        if scattered and name != "atomic_add":
            raise UserError("HPL202", f"hl.{name} at tensor-valued positions is not supported (positions given "
                                      "twice would have to combine in order, which a one-hot scatter cannot do; "
                                      "hl.atomic_add can)", rng)
        values = [unwrap(v) for v in values[: want - 2]]
        if len(values) != want - 2:
            raise UserError("HPL103", f"hl.{name}: missing value", rng)
        if scattered:  # every position adds its value, a position given twice both (a one-hot matmul sums them)
            add = values[0]
            if isinstance(add, Value) and add.dtype != target.dtype:
                add = self.ops.cast(add, target.dtype, rng)
            self.t.store_at(target, index, add, "atomic_add", rng)
            return old
        combine = ATOMICS[name]
        if name == "atomic_cas":
            new = self.ops.where(self.ops.binary("eq", old, values[0], rng), values[1], old, rng)
        elif combine is None:  # atomic_xchg
            new = values[0]
        else:
            new = self.ops.binary(combine, old, values[0], rng)
        if isinstance(new, Value) and new.dtype != target.dtype:
            new = self.ops.cast(new, target.dtype, rng)
        self.t.store_at(target, index, new, None, rng)
        return old
