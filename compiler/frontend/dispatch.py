"""Name resolution for calls and attributes: `hl.*`, `torch.*`, tensor methods, tiles, math, builtins."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ..diagnostics import Range, UserError
from ..ir import Op, TileDim, Value
from . import composites, pairs
from .jagged import jagged_spec
from .limits import check_product, check_range, check_round
from .ops import BINARY_FUNCS, CASTS, REDUCTIONS, UNARY
from .tunables import FRAGMENTS, make_fragment, tunable_value
from .upstream_names import NUM_SM_CALLS, UPSTREAM_NAMES, num_sm
from .values import DEVICE_SENTINEL, BlockSize, Module, NamedConst, Tile, TileId, TileLoopSpec

if TYPE_CHECKING:
    from .tracer import Tracer

HL = "helion.language"
TORCH_DTYPES = {
    name: getattr(torch, name)
    for name in ("float32", "float", "bfloat16", "float16", "half", "int32", "int", "int16", "int8", "uint8",
                 "bool", "int64", "long", "float64", "double", "float8_e4m3fn", "float8_e5m2")
}
_MATH = {"sqrt": math.sqrt, "exp": math.exp, "log": math.log, "log2": math.log2, "ceil": math.ceil,
         "floor": math.floor, "pow": math.pow, "isqrt": math.isqrt, "gcd": math.gcd, "prod": math.prod,
         "fabs": math.fabs, "tanh": math.tanh, "log10": math.log10, "exp2": lambda x: 2.0**x}
_MATH_CONST = {"pi": math.pi, "e": math.e, "inf": math.inf, "nan": math.nan}
_MAX_INT = 2**62
RAND_MIX = (1, -1640531535, -2048144777, -1028477379)  # hl.rand counter: per-dim odd multipliers (int32), last dim first
ATOMICS = {"atomic_add": "add", "atomic_max": "maximum", "atomic_min": "minimum", "atomic_and": "and",
           "atomic_or": "or", "atomic_xor": "xor", "atomic_xchg": None, "atomic_cas": None}


@dataclass(frozen=True)
class BoundMethod:
    obj: Any
    name: str


def unwrap(v: Any) -> Any:
    """A named scalar's value, a torch.Size as a tuple; anything else as it is."""
    if isinstance(v, NamedConst):
        return v.value
    if isinstance(v, torch.Size):
        return tuple(v)
    return v


def _as_int(v: Any, what: str, rng: Range) -> int:
    v = unwrap(v)
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, Value | Tile | TileId):
            got = "a value computed on the device (such as tile.begin or a loaded tensor)"
        elif isinstance(v, float):
            got = f"the float {v!r}"
        else:
            got = f"a {type(v).__name__}"
        raise UserError("HPL106", f"{what} must be an integer known at compile time (from shapes, constants or "
                                  f"int arguments), not {got}", rng)
    if abs(v) > _MAX_INT:
        raise UserError("HPL105", f"{what} {v} is too large", rng)
    return v


def _shape_arg(args: list, tracer_blocks: Any, rng: Range) -> tuple[int, ...]:
    """A shape given as a list/tuple/Size or as several ints; tiles count as their block size."""
    if len(args) == 1 and isinstance(unwrap(args[0]), tuple | list):
        args = list(unwrap(args[0]))
    out = []
    for a in args:
        if isinstance(a, Tile):
            out.append(a.dim.block_size)
        else:
            n = _as_int(a, "a shape entry", rng)
            if n < 0 and n != -1:
                raise UserError("HPL105", f"negative size {n} in a shape", rng)
            out.append(n)
    return tuple(out)


def _load_tiles(value: Value) -> tuple | None:
    """For a block loaded straight from a tensor, which tile each of its dims spans (None for whole dims):
    what `zeros_like(x[tile_m, 0])` needs to know of it, so the block itself need not be loaded. None when
    `value` is no such block."""
    from ..ir import Load

    load = value.producer
    if not isinstance(load, Load):
        return None
    tiles: list[TileDim | None] = []
    for item in load.index:
        if item[0] == "tile":
            tiles.append(item[1])
        elif item[0] in ("full", "newaxis", "window"):
            tiles.append(None)
        elif item[0] not in ("int", "scalar", "grid", "id"):  # those take one position: no dim
            return None
    return tuple(tiles) if len(tiles) == len(value.shape) else None


def _shape_tiles(args: list) -> tuple:
    """Per shape entry, the tile it was given as (its dim then spans that tile), else None."""
    if len(args) == 1 and isinstance(unwrap(args[0]), tuple | list):
        args = list(unwrap(args[0]))
    return tuple(a.dim if isinstance(a, Tile) else None for a in args)


FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)


class Dispatcher:
    def __init__(self, tracer: Tracer):
        self.t = tracer
        self.ops = tracer.ops

    # -- attributes ------------------------------------------------------------------------------------

    def attribute(self, obj: Any, attr: str, rng: Range) -> Any:
        if isinstance(obj, Module):
            q = obj.qualname
            if q == "math" and attr in _MATH_CONST:
                return _MATH_CONST[attr]
            if q == "torch" and attr in TORCH_DTYPES:
                return TORCH_DTYPES[attr]
            name = f"{q}.{attr}"
            return UPSTREAM_NAMES[name] if name in UPSTREAM_NAMES else Module(name)
        if isinstance(obj, Value):
            if attr == "shape":
                return tuple(obj.shape)
            if attr == "dtype":
                return obj.dtype
            if attr == "device":
                return DEVICE_SENTINEL
            if attr == "ndim":
                return len(obj.shape)
            if attr == "T":
                return self.ops.permute(obj, tuple(reversed(range(len(obj.shape)))), rng)
            return BoundMethod(obj, attr)
        if isinstance(obj, Tile):
            return self.tile_attr(obj, attr, rng)
        if isinstance(obj, tuple | list) and attr in ("index", "count"):
            return BoundMethod(obj, attr)
        if isinstance(obj, torch.dtype) and attr in ("itemsize", "is_floating_point"):
            return obj.itemsize if attr == "itemsize" else BoundMethod(obj, attr)
        raise UserError("HPL102", f"`{type(obj).__name__}` has no attribute `{attr}` here", rng)

    def tile_attr(self, tile: Tile, attr: str, rng: Range) -> Any:
        d = tile.dim
        if attr in ("block_size", "id", "count"):  # the kernel's meaning now depends on the block size
            self.t.observed_blocks.update(x.block_index for x in (d, d.parent) if x is not None and x.block_index is not None)
        if attr == "block_size":
            return d.block_size
        if attr == "id":
            return TileId(d)
        if attr == "count":
            return d.steps
        if attr in ("begin", "end"):
            return self.ops.scalar(f"tile_{attr}", (d,), rng)
        if attr == "index":
            return self.ops.arange(d.block_size, torch.int32, ("tile", d), rng)
        raise UserError("HPL102", f"tiles have no attribute `{attr}` (use .index, .begin, .end, .id, .block_size)", rng)

    def tile_scalar(self, v: Any, rng: Range) -> Any:
        """A tile used in arithmetic: hl.grid indices are scalars, `tile.id` is the block number and an
        hl.tile tile stands for its positions (`tile + k` is `tile.index + k`)."""
        if isinstance(v, Tile):
            if v.dim.api == "grid":
                return self.ops.scalar("tile_begin", (v.dim,), rng)
            return self.tile_attr(v, "index", rng)
        if isinstance(v, TileId):
            return self.ops.scalar("tile_id", (v.dim,), rng)
        return v

    # -- value indexing --------------------------------------------------------------------------------

    def value_index(self, base: Value, index: Any, rng: Range) -> Value:
        return self.t.indexer.index_value(base, index, rng)

    # -- calls -----------------------------------------------------------------------------------------

    def call(self, func: Any, args: list, kwargs: dict, rng: Range) -> Any:
        if isinstance(func, BoundMethod):
            return self.method(func.obj, func.name, args, kwargs, rng)
        if isinstance(func, Module):
            return self.function(func.qualname, args, kwargs, rng)
        if isinstance(func, torch.dtype):
            raise UserError("HPL101", "dtypes are not callable", rng)
        raise UserError("HPL101", f"`{type(func).__name__}` is not callable in a kernel", rng)

    def function(self, q: str, args: list, kwargs: dict, rng: Range) -> Any:
        if q.startswith(HL + ".") or q in ("helion.cdiv", "helion.next_power_of_2"):
            return self.hl(q.rsplit(".", 1)[1], args, kwargs, rng)
        if q.startswith("builtins."):
            return self.builtin(q[9:], args, kwargs, rng)
        if q in NUM_SM_CALLS:  # persistent kernels size their worker grid by it
            return num_sm(self.t.chip)
        if q.startswith("helion.autotuner.") and q.rsplit(".", 1)[1] in FRAGMENTS:
            return make_fragment(q.rsplit(".", 1)[1], [unwrap(a) for a in args], kwargs, rng)
        if q.startswith("math."):
            fn = _MATH.get(q[5:])
            if fn is None:
                raise UserError("HPL102", f"`{q}` is not supported", rng)
            values = [unwrap(a) for a in args]
            if q == "math.prod" and values:
                check_product(values[0], rng)
            try:
                return fn(*values)
            except (ValueError, TypeError, OverflowError) as exc:
                raise UserError("HPL105", f"{q}: {exc}", rng) from None
        for prefix in ("torch.nn.functional.", "torch.special.", "torch."):
            if q.startswith(prefix):
                return self.torch_fn(q[len(prefix):], args, kwargs, rng)
        raise UserError("HPL102", f"`{q}` is not supported in a kernel", rng)

    def builtin(self, name: str, args: list, kwargs: dict, rng: Range) -> Any:
        vals = [unwrap(a) for a in args]
        if any(isinstance(v, Value) for v in vals):
            if name == "float" or name == "int":
                raise UserError("HPL101", f"{name}() of a tensor is not supported; use .to(dtype)", rng)
            if name in ("min", "max") and len(vals) == 2:
                return self.ops.binary("minimum" if name == "min" else "maximum", vals[0], vals[1], rng)
            if name == "abs":
                return self.ops.unary("abs", vals[0], rng)
            raise UserError("HPL101", f"{name}() of a tensor is not supported", rng)
        try:
            if name == "print":
                return None
            if name == "range":
                r = range(*[_as_int(v, "range()", rng) for v in vals])
                check_range(r, rng)
                return r
            if name == "round":
                check_round(vals, rng)
            fn = {"float": float, "int": int, "bool": bool, "min": min, "max": max, "abs": abs, "len": len,
                  "tuple": tuple, "list": list, "round": round, "divmod": divmod, "slice": slice,
                  "isinstance": lambda *a: False}[name]
            return fn(*vals)
        except (TypeError, ValueError, OverflowError) as exc:
            raise UserError("HPL105", f"{name}(): {exc}", rng) from None

    # -- helion.language -------------------------------------------------------------------------------

    def hl(self, name: str, args: list, kwargs: dict, rng: Range) -> Any:
        if name == "cdiv":
            a, b = (_as_int(x, "cdiv argument", rng) for x in args[:2])
            if b == 0:
                raise UserError("HPL105", "cdiv by zero", rng)
            return -(-a // b)
        if name == "next_power_of_2":
            n = _as_int(args[0], "next_power_of_2 argument", rng)
            return 1 if n <= 1 else 1 << (n - 1).bit_length()
        if name == "specialize":
            v = unwrap(args[0]) if args else None
            if isinstance(v, tuple):
                return v
            return _as_int(v, "hl.specialize argument", rng)
        if name == "register_block_size":
            if len(args) == 2:
                extent = _as_int(args[1], "register_block_size max", rng)
            elif len(args) == 1:
                extent = _as_int(args[0], "register_block_size argument", rng)
            else:
                raise UserError("HPL103", "hl.register_block_size(size) takes one size", rng)
            block = self.t.blocks.allocate(extent, rng)
            # a block past the extent covers it once (its tiles are cut to it): `hl.zeros([t, block])` must agree
            return BlockSize(min(int(block), extent), block.index) if 0 < extent < block else block
        if name in ("tile", "grid"):
            return self.loop_spec(name, args, kwargs, rng)
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
            shape = _shape_arg([args[0]], None, rng)
            value = 0.0 if name == "zeros" else unwrap(args[1] if len(args) > 1 else kwargs.get("value"))
            dtype = kwargs.get("dtype", args[2] if name == "full" and len(args) > 2 else
                               (args[1] if name == "zeros" and len(args) > 1 else torch.float32))
            if not isinstance(dtype, torch.dtype):
                raise UserError("HPL103", f"hl.{name}: dtype must be a torch dtype", rng)
            if not isinstance(value, int | float | bool):
                raise UserError("HPL106", f"hl.{name}: the fill value must be a number", rng)
            return self.ops.full(shape, value, dtype, rng, tiles=_shape_tiles([args[0]]))
        if name == "arange":
            vals = [_as_int(a, "hl.arange argument", rng) for a in args]
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
                parts.append(self.ops.arange(_as_int(e, "an hl.rand size", rng), torch.int32, None, rng))
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
        if any(it[0] == "gather" for it in old.producer.index):
            raise UserError("HPL202", f"hl.{name} at tensor-valued positions is not supported (positions given "
                                      "twice would have to combine, which a one-hot scatter cannot do)", rng)
        values = [unwrap(v) for v in values[: want - 2]]
        if len(values) != want - 2:
            raise UserError("HPL103", f"hl.{name}: missing value", rng)
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

    def loop_spec(self, api: str, args: list, kwargs: dict, rng: Range) -> TileLoopSpec:
        if not args:
            raise UserError("HPL103", f"hl.{api}(...) needs a size", rng)
        first = unwrap(args[0])
        multi = isinstance(first, tuple | list)
        block = kwargs.get("block_size")
        if multi:
            second = unwrap(args[1]) if len(args) > 1 else None
            if second is not None and (not isinstance(second, tuple | list) or len(second) != len(first)):
                raise UserError("HPL103", f"hl.{api}(begins, ends) needs two lists of equal length", rng)
            pairs = [[b, e] for b, e in zip(first, second, strict=True)] if second is not None else [[e] for e in first]
            bounds = [self._device_bounds(api, p, rng) for p in pairs]
            if any(b is not None for b in bounds):
                blocks = self._device_blocks(block, len(pairs), rng)
                for i, p in enumerate(pairs):  # the dims with compile-time bounds
                    if bounds[i] is None:
                        lo, hi = (0, _as_int(p[0], f"hl.{api} size", rng)) if len(p) == 1 else \
                            (_as_int(p[0], "begin", rng), _as_int(p[1], "end", rng))
                        if hi - lo <= 0:
                            raise UserError("HPL105", f"hl.{api} over an empty range ({lo}..{hi})", rng)
                return TileLoopSpec(api, tuple(0 if b is not None else p[-1] for b, p in zip(bounds, pairs, strict=True)),
                                    tuple(0 if b is not None or len(p) == 1 else p[0] for b, p in
                                          zip(bounds, pairs, strict=True)), blocks, True, None, tuple(bounds))
            extents = tuple(_as_int(e, f"hl.{api} size", rng) for e in first)
            begins = (0,) * len(extents)
            if second is not None:
                begins, extents = extents, tuple(_as_int(e, f"hl.{api} end", rng) for e in second)
        else:
            parent = self._enclosing_tile(args) if len(args) == 2 else None
            bounds = self._device_bounds(api, args, rng) if parent is None else None
            if bounds is not None:
                return TileLoopSpec(api, (0,), (0,), self._device_blocks(block, 1, rng), False, None, (bounds,))
            if parent is not None:
                begins, extents = (0,), (parent.block_size,)
            elif len(args) > 1:
                begins, extents = (_as_int(args[0], "begin", rng),), (_as_int(args[1], "end", rng),)
            else:
                begins, extents = (0,), (_as_int(first, f"hl.{api} size", rng),)
        for b, e in zip(begins, extents, strict=True):
            if e - b <= 0:
                raise UserError("HPL105", f"hl.{api} over an empty range ({b}..{e})", rng)
        n = len(extents)
        if block is None:
            blocks: tuple = (None,) * n
        elif isinstance(block, tuple | list):
            if len(block) != n:
                raise UserError("HPL103", f"block_size has {len(block)} entries for {n} dims", rng)
            blocks = tuple(b if isinstance(b, BlockSize) or b is None else _as_int(b, "block_size", rng) for b in block)
        else:
            blocks = (block if isinstance(block, BlockSize) else _as_int(block, "block_size", rng),) * n
        if api == "grid" and block is not None:
            raise UserError("HPL103", "hl.grid takes no block_size", rng)
        parent = None if multi else self._enclosing_tile(args) if len(args) == 2 else None
        if parent is not None and api != "tile":
            raise UserError("HPL101", f"sub-tiling `{parent.name}` needs hl.tile", rng)
        return TileLoopSpec(api, extents, begins, blocks, multi, parent)

    @staticmethod
    def _device_blocks(block: Any, n: int, rng: Range) -> tuple:
        if isinstance(block, tuple | list):
            if len(block) != n:
                raise UserError("HPL103", f"block_size has {len(block)} entries for {n} dims", rng)
            return tuple(b if isinstance(b, BlockSize) or b is None else _as_int(b, "block_size", rng) for b in block)
        return (block if isinstance(block, BlockSize) or block is None else _as_int(block, "block_size", rng),) * n

    @staticmethod
    def _device_bounds(api: str, args: list, rng: Range) -> tuple | None:
        """(begin, end) of `hl.tile(begin, end)` / `hl.tile(end)` when a bound is a scalar computed on the
        device (loaded offsets, `tile.end - tile.begin`); None when both are known at compile time."""
        given = [unwrap(a) for a in args[:2]]
        if not any(isinstance(v, Value) for v in given):
            return None
        for v in given:
            if isinstance(v, Value) and (v.shape or v.space != "device" or v.dtype.is_floating_point
                                         or v.dtype == torch.bool):
                what = "a tensor" if v.shape else "a host value" if v.space != "device" else f"a {v.dtype} scalar"
                raise UserError("HPL106", f"hl.{api} bounds must be integers: compile-time ints or integer scalars "
                                          f"computed in the loop (one element of a tensor), not {what}", rng)
        if api != "tile":
            raise UserError("HPL106", "hl.grid bounds must be known at compile time; use hl.tile for a range "
                                      "computed on the device", rng)
        ints = [v if isinstance(v, Value) else _as_int(v, "a loop bound", rng) for v in given]
        return (0, ints[0]) if len(ints) == 1 else (ints[0], ints[1])

    @staticmethod
    def _enclosing_tile(args: list) -> TileDim | None:
        """`(t.begin, t.end)` of one launch-grid tile `t`: the bounds of a sub-tiling loop."""
        ops = [a.producer for a in args if isinstance(a, Value)]
        if len(ops) != 2 or any(not isinstance(o, Op) for o in ops):
            return None
        if ops[0].kind == "tile_begin" and ops[1].kind == "tile_end" and ops[0].args[0] == ops[1].args[0]:
            return None if ops[0].args[0].dynamic else ops[0].args[0]
        return None

    # -- torch functions -------------------------------------------------------------------------------

    def torch_fn(self, name: str, args: list, kwargs: dict, rng: Range) -> Any:
        if name in ("empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like"):
            return self.alloc(name, args, kwargs, rng)
        if name == "broadcast_tensors":
            tensors = [a for a in args if isinstance(a, Value)]
            if len(tensors) != len(args):
                raise UserError("HPL103", "torch.broadcast_tensors takes tensors", rng)
            try:
                shape = tuple(torch.broadcast_shapes(*(t.shape for t in tensors)))
            except RuntimeError as exc:
                raise UserError("HPL105", f"broadcast_tensors: {exc}", rng) from None
            return tuple(t if t.shape == shape else self.ops.broadcast_to(t, shape, rng) for t in tensors)
        if name == "promote_types":
            if len(args) != 2 or not all(isinstance(a, torch.dtype) for a in args):
                raise UserError("HPL103", "torch.promote_types(dtype, dtype)", rng)
            return torch.promote_types(*args)
        if name == "result_type":
            metas = [a.meta if isinstance(a, Value) else unwrap(a) for a in args]
            return torch.result_type(*metas)
        if name in ("cat", "concat", "concatenate", "stack"):
            tensors = unwrap(args[0] if args else kwargs.get("tensors"))
            if not isinstance(tensors, tuple | list):
                raise UserError("HPL103", f"torch.{name} takes a tuple or list of tensors", rng)
            dim = _as_int(args[1] if len(args) > 1 else kwargs.get("dim", 0), "dim", rng)
            return self.ops.cat("stack" if name == "stack" else "cat", tuple(tensors), dim, rng)
        if not args:
            raise UserError("HPL103", f"torch.{name} needs arguments", rng)
        return self.method(args[0], name, list(args[1:]), kwargs, rng, from_function=True)

    def alloc(self, name: str, args: list, kwargs: dict, rng: Range) -> Value:
        if self.t.in_device:
            like = name.endswith("_like")
            if like and isinstance(args[0], Value):
                base = args[0]
                fill = {"zeros_like": 0.0, "ones_like": 1.0, "empty_like": 0.0}.get(name)
                if fill is None:
                    fill = unwrap(args[1] if len(args) > 1 else kwargs.get("fill_value"))
                tiles = _load_tiles(base)
                if tiles is not None:  # only its shape and dtype are used: the block is never loaded
                    return self.ops.full(base.shape, fill, kwargs.get("dtype", base.dtype), rng, tiles=tiles)
                return self.ops.full(base.shape, fill, kwargs.get("dtype", base.dtype), rng, like=base)
            raise UserError("HPL101", f"torch.{name} inside a device loop: use hl.zeros / hl.full", rng)
        if name.endswith("_like"):
            if not args or not isinstance(args[0], Value):
                raise UserError("HPL103", f"torch.{name} needs a tensor", rng)
            shape, dtype = args[0].shape, kwargs.get("dtype", args[0].dtype)
            rest = args[1:]
        else:
            shape_args = args[:1] if name == "full" else args
            shape = _shape_arg(shape_args, None, rng)
            dtype = kwargs.get("dtype", torch.float32)
            rest = args[1:] if name == "full" else []
        init = {"empty": "empty", "zeros": "zeros", "ones": "ones", "full": "full"}[name.removesuffix("_like")]
        fill = unwrap(rest[0] if rest else kwargs.get("fill_value", 0.0)) if init == "full" else (1.0 if init == "ones" else 0.0)
        return self.host_alloc(shape, dtype, init, fill, rng)

    def host_alloc(self, shape: tuple[int, ...], dtype: Any, init: str, fill: Any, rng: Range) -> Value:
        if not isinstance(dtype, torch.dtype):
            raise UserError("HPL103", "dtype must be a torch dtype", rng)
        if any(s < 0 for s in shape):
            raise UserError("HPL105", f"negative size in shape {list(shape)}", rng)
        numel = math.prod(shape)
        if numel > 2**40:
            raise UserError("HPL105", f"allocation of {numel:.3g} elements is too large", rng)
        return self.ops.make("alloc", (), {"shape": tuple(shape), "dtype": dtype, "init": init, "value": fill},
                             lambda shape, dtype, init, value: torch.empty(shape, dtype=dtype, device="meta"), rng,
                             space="host")

    # -- tensor methods (and torch.fn(x, ...)) ----------------------------------------------------------

    def method(self, obj: Any, name: str, args: list, kwargs: dict, rng: Range, from_function: bool = False) -> Any:
        if isinstance(obj, tuple | list) and name in ("index", "count"):
            return getattr(obj, name)(*[unwrap(a) for a in args])
        if isinstance(obj, torch.dtype):
            return obj.is_floating_point
        ops = self.ops
        x = obj
        if name in BINARY_FUNCS:
            other = args[0] if args else kwargs.get("other")
            if "alpha" in kwargs:
                other = ops.binary("mul", other, unwrap(kwargs["alpha"]), rng)
            return ops.binary(BINARY_FUNCS[name], x, unwrap(other) if not isinstance(other, Value) else other, rng)
        if not isinstance(x, Value):
            if name in UNARY and isinstance(unwrap(x), int | float):
                raise UserError("HPL101", f"torch.{name} of a Python number: use math.{name}", rng)
            raise UserError("HPL105", f"`{name}` needs a tensor, got {type(x).__name__}", rng)
        if name in ("size",):
            if args:
                d = _as_int(args[0], "size() dim", rng)
                if not -len(x.shape) <= d < len(x.shape):
                    raise UserError("HPL105", f"dim {d} out of range for a {len(x.shape)}-d tensor", rng)
                return x.shape[d]
            return tuple(x.shape)
        if name in ("dim", "ndimension"):
            return len(x.shape)
        if name == "numel":
            return math.prod(x.shape)
        if name == "stride":  # the kernel reads its arguments contiguous (runtime.to_jax), so row-major strides
            strides = tuple(math.prod(x.shape[i + 1:]) for i in range(len(x.shape)))
            if not args:
                return strides
            d = _as_int(args[0], "stride() dim", rng)
            if not -len(x.shape) <= d < len(x.shape):
                raise UserError("HPL105", f"dim {d} out of range for a {len(x.shape)}-d tensor", rng)
            return strides[d]
        if name == "clone" and not self.t.in_device:  # a new tensor with x's contents (contiguous/detach alias x)
            return self.ops.make("clone", (x,), {}, lambda t: t.clone(), rng, space="host")
        if name in ("contiguous", "clone", "detach"):
            return x
        if name == "is_floating_point":
            return x.dtype.is_floating_point
        if name == "is_contiguous":  # the arrays a kernel receives are always contiguous (runtime.to_jax)
            return True
        approximate = unwrap(args[0] if args else kwargs.get("approximate", "none")) if name == "gelu" else None
        if name in composites.UNARY_COMPOSITES or approximate == "tanh":
            return composites.unary(ops, name, x, list(args), kwargs, rng)
        if name in composites.BINARY_COMPOSITES:
            other = args[0] if args else kwargs.get("other")
            return composites.binary(ops, name, x, other if isinstance(other, Value) else unwrap(other), rng)
        if name == "gelu" and approximate not in (None, "none"):
            raise UserError("HPL103", f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}", rng)
        if name in UNARY:
            return ops.unary(name, x, rng)
        if name == "where" and from_function:
            return ops.where(x, args[0], args[1], rng)
        if name in ("clamp", "clip"):
            lo = unwrap(args[0] if args else kwargs.get("min"))
            hi = unwrap(args[1] if len(args) > 1 else kwargs.get("max"))
            return ops.clamp(x, lo, hi, rng)
        if name in ("max", "min") and args and isinstance(args[0], Value):
            return ops.binary("maximum" if name == "max" else "minimum", x, args[0], rng)
        if name in REDUCTIONS:
            dim = unwrap(args[0] if args else kwargs.get("dim"))
            keepdim = bool(unwrap(args[1] if len(args) > 1 else kwargs.get("keepdim", False)))
            if isinstance(dim, Value):
                raise UserError("HPL106", f"{name}: dim must be a constant", rng)
            result = ops.reduce(name, x, dim, keepdim, rng)
            if "dtype" in kwargs:
                result = ops.cast(result, kwargs["dtype"], rng)
            return result
        if name in ("cumsum", "cumprod"):
            dim = unwrap(args[0] if args else kwargs.get("dim"))
            if dim is None or isinstance(dim, Value):
                raise UserError("HPL103", f"{name} needs a constant dim=", rng)
            if kwargs.get("dtype") is not None:
                x = ops.cast(x, kwargs["dtype"], rng)
            return ops.scan(name, x, _as_int(dim, "dim", rng), rng)
        if name in ("softmax", "log_softmax"):
            dim = unwrap(args[0] if args else kwargs.get("dim"))
            if dim is None:
                raise UserError("HPL103", f"{name} needs dim=", rng)
            return ops.softmax(name, x, _as_int(dim, "dim", rng), kwargs.get("dtype"), rng)
        if name in ("matmul", "mm", "bmm"):
            return ops.dot(x, args[0], None, None, rng)
        if name in ("addmm", "baddbmm"):
            a, b = args[0], args[1]
            beta, alpha = unwrap(kwargs.get("beta", 1)), unwrap(kwargs.get("alpha", 1))
            if beta != 1 or alpha != 1:
                raise UserError("HPL101", f"{name} with alpha/beta other than 1 is not supported", rng)
            if x.dtype == torch.float32:
                return ops.dot(a, b, x, None, rng)
            prod = ops.dot(a, b, None, torch.float32, rng)
            return ops.cast(ops.binary("add", prod, x, rng), x.dtype, rng)
        if name in ("to", "type"):
            dtype = args[0] if args else kwargs.get("dtype")
            if isinstance(dtype, Value):
                dtype = dtype.dtype
            if dtype is DEVICE_SENTINEL or dtype is None:
                return x
            if not isinstance(dtype, torch.dtype):
                raise UserError("HPL103", f".{name}() needs a dtype", rng)
            return x if dtype == x.dtype else ops.cast(x, dtype, rng)
        if name in CASTS:
            return ops.cast(x, CASTS[name], rng) if CASTS[name] != x.dtype else x
        if name == "type_as":
            return ops.cast(x, args[0].dtype, rng)
        if name in ("reshape", "view"):
            shape = _shape_arg(args, None, rng)
            if shape.count(-1) > 1:
                raise UserError("HPL105", "only one -1 is allowed in a shape", rng)
            halves = pairs.joined_halves(x, shape) if x.space == "device" else None
            if halves is not None:  # hl.join(a, b).permute(..., -1, -2).reshape([..., d]): the halves side by side
                self.t.used_pairs = True
                return ops.cat("cat", halves, -1, rng)
            return ops.reshape(x, shape, rng)
        if name in ("transpose", "swapaxes"):
            if len(args) != 2:
                raise UserError("HPL103", f"{name}(dim0, dim1)", rng)
            return ops.transpose(x, _as_int(args[0], "dim", rng), _as_int(args[1], "dim", rng), rng)
        if name == "t":
            return ops.transpose(x, 0, 1, rng)
        if name == "permute":
            dims = _shape_arg(args, None, rng) if args else ()
            return ops.permute(x, dims, rng)
        if name == "unsqueeze":
            d = _as_int(args[0], "dim", rng)
            d = d % (len(x.shape) + 1)
            items = (slice(None),) * d + (None,)
            return ops.index(x, items, rng)
        if name == "squeeze":
            if args:
                d = _as_int(args[0], "dim", rng) % max(1, len(x.shape))
                shape = tuple(s for i, s in enumerate(x.shape) if i != d or s != 1)
            else:
                shape = tuple(s for s in x.shape if s != 1)
            return ops.reshape(x, shape, rng)
        if name in ("expand", "broadcast_to", "expand_as"):
            if name == "expand_as":
                shape = args[0].shape
            else:
                shape = _shape_arg(args, None, rng)
                shape = tuple(x.shape[i - (len(shape) - len(x.shape))] if s == -1 else s for i, s in enumerate(shape))
            return ops.broadcast_to(x, shape, rng)
        if name in ("new_empty", "new_zeros", "new_ones", "new_full"):
            init = name[4:]
            # new_full(size, fill); the others take the size as one sequence or as several ints
            sizes = args[:1] if init == "full" or (args and isinstance(unwrap(args[0]), tuple | list)) else args
            shape = _shape_arg(sizes, None, rng)
            dtype = kwargs.get("dtype", x.dtype)
            fill = unwrap(args[1] if len(args) > 1 else kwargs.get("fill_value", 0.0)) if init == "full" else (
                1.0 if init == "ones" else 0.0)
            if self.t.in_device:
                return ops.full(shape, fill, dtype, rng, tiles=_shape_tiles(sizes))
            return self.host_alloc(shape, dtype, init, fill, rng)
        if name == "flatten":
            return ops.reshape(x, (-1,), rng)
        if name in ("view_as", "reshape_as"):
            if not args or not isinstance(args[0], Value):
                raise UserError("HPL103", f".{name}() needs a tensor", rng)
            return ops.reshape(x, tuple(args[0].shape), rng)
        if name == "pad":
            widths = unwrap(args[0] if args else kwargs.get("pad"))
            mode = unwrap(args[1] if len(args) > 1 else kwargs.get("mode", "constant"))
            value = unwrap(args[2] if len(args) > 2 else kwargs.get("value"))
            if mode != "constant":
                raise UserError("HPL101", f"pad mode {mode!r} is not supported; use mode='constant'", rng)
            if not isinstance(widths, tuple | list):
                raise UserError("HPL103", "pad needs a tuple of widths", rng)
            value = 0 if value is None else value
            if not isinstance(value, int | float | bool):
                raise UserError("HPL106", "pad: the fill value must be a number known at compile time", rng)
            return ops.pad(x, tuple(_as_int(w, "a pad width", rng) for w in widths), value, rng)
        if name == "gather":
            dim = args[0] if args else kwargs.get("dim")
            index = args[1] if len(args) > 1 else kwargs.get("index")
            return ops.gather(x, _as_int(dim, "gather dim", rng), index, rng)
        if name == "topk":
            k = _as_int(args[0] if args else kwargs.get("k"), "topk k", rng)
            dim = _as_int(args[1] if len(args) > 1 else kwargs.get("dim", -1), "topk dim", rng)
            largest = unwrap(args[2] if len(args) > 2 else kwargs.get("largest", True))
            if not isinstance(largest, bool):
                raise UserError("HPL106", "topk: largest must be True or False", rng)
            return ops.topk(x, k, dim, largest, rng)
        if name in ("item", "tolist", "numpy", "cpu", "cuda"):
            raise UserError("HPL101", f".{name}() is not supported in a kernel", rng)
        raise UserError("HPL102", f"`{name}` is not supported by the Pallas backend", rng)
