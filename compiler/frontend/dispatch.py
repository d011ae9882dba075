"""Name resolution for calls and attributes: `hl.*` (hl_calls.py), `torch.*` and tensor methods
(torch_calls.py), tiles, modules, math and builtins (here)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ..ir.chips import fp8_problem
from ..ir.tile_ir import Value
from ..support.diagnostics import Range, UserError
from .hl_calls import HelionCalls
from .limits import check_product, check_range, check_round
from .scans import TORCH_SCANS
from .static_args import as_int, unwrap
from .torch_calls import TorchCalls
from .tunables import FRAGMENTS, make_fragment
from .upstream_names import NUM_SM_CALLS, UPSTREAM_NAMES, num_sm
from .values import DEVICE_SENTINEL, Module, Tile, TileId
from .vllm_platform import PlatformMethod, TpuPlatform
from .workspace_imports import Foreign, foreign_call

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
# upstream's own integer helpers, by every name a kernel reaches them with (`helion._utils` is where they live)
HELION_HELPERS = frozenset({"helion.cdiv", "helion.next_power_of_2", "helion._utils.cdiv", "helion._utils.next_power_of_2"})
_LIBRARIES = frozenset({"torch", "helion", "math", "builtins", "triton", "jax", "numpy", "functools", "operator"})
_MATH_CONST = {"pi": math.pi, "e": math.e, "inf": math.inf, "nan": math.nan}


_TYPE_INFO_ATTRS = frozenset({"min", "max", "eps", "tiny", "smallest_normal", "resolution", "bits"})


def _type_info(q: str, args: list, rng: Range) -> torch.finfo | torch.iinfo:
    """`torch.finfo(dtype)` / `torch.iinfo(dtype)` of a dtype known when compiling (finfo() is float32's)."""
    kind = torch.finfo if q == "torch.finfo" else torch.iinfo
    if not args and kind is torch.finfo:
        return torch.finfo(torch.float32)
    if len(args) != 1 or not isinstance(args[0], torch.dtype):
        raise UserError("HPL101", f"`{q}` needs one dtype known when compiling", rng)
    try:
        return kind(args[0])
    except TypeError:
        raise UserError("HPL105", f"`{q}` of {args[0]}: not a {'floating' if kind is torch.finfo else 'integer'} "
                                  "type", rng) from None


@dataclass(frozen=True)
class BoundMethod:
    obj: Any
    name: str


class Dispatcher(HelionCalls, TorchCalls):
    """Resolves attributes and calls for the tracer."""

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
            if q == "torch" and (problem := fp8_problem(attr, self.t.chip)) is not None:
                raise UserError("HPL108", problem, rng)
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
        if isinstance(obj, TpuPlatform):
            found = obj.attribute(attr)
            if found is None:
                raise UserError("HPL102", f"vLLM's `current_platform.{attr}` is not known on a TPU here", rng)
            return found
        if isinstance(obj, torch.finfo | torch.iinfo) and attr in _TYPE_INFO_ATTRS:
            return getattr(obj, attr)
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
        if isinstance(func, Foreign):
            return foreign_call(func, args, kwargs, rng)
        if isinstance(func, PlatformMethod):
            return func(*[unwrap(a) for a in args], **{k: unwrap(v) for k, v in kwargs.items()})
        if isinstance(func, torch.dtype):
            raise UserError("HPL101", "dtypes are not callable", rng)
        raise UserError("HPL101", f"`{type(func).__name__}` is not callable in a kernel", rng)

    def function(self, q: str, args: list, kwargs: dict, rng: Range) -> Any:
        if q.startswith(HL + ".") or q in HELION_HELPERS:
            return self.hl(q.rsplit(".", 1)[1], args, kwargs, rng)
        if q.startswith("builtins."):
            return self.builtin(q[9:], args, kwargs, rng)
        if q in TORCH_SCANS:  # upstream Helion replaces torch's scan by its own
            return self.hl("associative_scan", args, kwargs, rng)
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
        if q in ("torch.finfo", "torch.iinfo"):  # a dtype's limits: `1 / torch.finfo(torch.float8_e4m3fn).max`
            return _type_info(q, [unwrap(a) for a in args], rng)
        for prefix in ("torch.nn.functional.", "torch.special.", "torch."):
            if q.startswith(prefix):
                return self.torch_fn(q[len(prefix):], args, kwargs, rng)
        if q.split(".")[0] not in _LIBRARIES and "." in q:
            module, name = q.rsplit(".", 1)
            raise UserError("HPL102", f"`{name}` comes from `{module}`, and no file of that module is found in the "
                                      "folders above this file: its value cannot be read statically", rng)
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
                r = range(*[as_int(v, "range()", rng) for v in vals])
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
