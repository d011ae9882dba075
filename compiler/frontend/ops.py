"""The torch and `hl` operations kernels may use, typed by running torch itself on meta tensors.

Every operation becomes an IR `Op` whose `kind` names an emission template in `codegen/exprs.py`.
Arguments are normalised here (dims as ints, dtypes as torch dtypes) so emission is a plain lookup.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..ir.tile_ir import Op, Value, flat
from ..support.diagnostics import Range, UserError
from . import fast_types
from .meta_cache import bypassing, typed
from .values import NamedConst

UNARY = {
    "exp", "exp2", "log", "log2", "log1p", "expm1", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "abs",
    "sin", "cos", "neg", "reciprocal", "floor", "ceil", "erf", "logical_not", "square", "silu", "sign",
    "isnan", "isinf", "round", "trunc", "tan", "atan", "bitwise_not", "gelu",
}
TRANSCENDENTAL = {"exp", "exp2", "log", "log2", "log1p", "expm1", "sqrt", "rsqrt", "tanh", "sigmoid",
                  "sin", "cos", "reciprocal", "erf", "silu", "tan", "atan", "gelu", "softmax", "log_softmax"}
BINARY = {
    "add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%", "pow": "**",
    "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
    "and": "&", "or": "|", "xor": "^", "lshift": "<<", "rshift": ">>", "matmul": "@",
}
BINARY_FUNCS = {
    "add": "add", "sub": "sub", "subtract": "sub", "mul": "mul", "multiply": "mul", "div": "div",
    "divide": "div", "true_divide": "div", "floor_divide": "floordiv", "remainder": "mod", "pow": "pow",
    "eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "maximum": "maximum",
    "minimum": "minimum", "logical_and": "logical_and", "logical_or": "logical_or", "atan2": "atan2",
    "bitwise_and": "and", "bitwise_or": "or", "bitwise_xor": "xor", "fmod": "fmod",
}
# ops that keep positions elementwise (broadcasting aside): padding and lane provenance pass through them
ELEMENTWISE = (UNARY | (set(BINARY) - {"matmul"}) | set(BINARY_FUNCS.values())
               | {"where", "clamp", "to", "neg", "relu", "reciprocal", "gelu"})
REDUCTIONS = {"sum", "mean", "amax", "amin", "prod", "argmax", "argmin", "logsumexp", "max", "min", "any", "all"}
CASTS = {"float": torch.float32, "bfloat16": torch.bfloat16, "half": torch.float16, "int": torch.int32,
         "bool": torch.bool, "double": torch.float32, "long": torch.int32}

_NARROW = {torch.int64: torch.int32, torch.float64: torch.float32}


def _narrow(meta: torch.Tensor) -> torch.Tensor:
    """TPUs have no 64-bit types; torch's int64/float64 results become int32/float32 like jax's defaults."""
    target = _NARROW.get(meta.dtype)
    return meta.to(target) if target is not None else meta


def _meta_arg(a: Any) -> Any:
    if isinstance(a, Value):
        return a.meta
    if isinstance(a, NamedConst):
        return a.value
    if isinstance(a, tuple | list):
        return type(a)(_meta_arg(x) for x in a)
    return a


class OpBuilder:
    """Creates typed `Op`s; the tracer supplies where they go (`emit`) and their source range."""

    def __init__(self, emit: Callable[[Op], None]):
        self.emit = emit

    def space_of(self, args: tuple, rng: Range) -> str:
        spaces = {a.space for a in flat(args) if isinstance(a, Value)}
        if len(spaces) > 1:
            scalar = next((a for a in flat(args) if isinstance(a, Value) and a.space == "host" and not a.shape), None)
            if scalar is not None:  # upstream Helion refuses this use too (HostTensorDirectUsage)
                name = scalar.hint or "t"
                raise UserError("HPL101", f"the 0-d host tensor `{name}` cannot be used directly in a device loop: "
                                f"read it first with `{name}[()]` or `hl.load({name}, [])`", rng)
            # vLLM's rms_norm_fp8_block_quant: `normed = x * rms * weight.to(torch.float32)` in the loop
            host = next((a for a in flat(args) if isinstance(a, Value) and a.space == "host"), None)
            what = f"the host tensor `{host.hint}`" if host is not None and host.hint else "a host tensor"
            raise UserError("HPL101", f"{what} is used whole inside a device loop, with device values (upstream "
                            "Helion refuses this too: HostTensorDirectUsage); load it in the loop first (`t[:]`, "
                            "or indexed by the loop's tiles) and compute with the loaded value", rng)
        return spaces.pop() if spaces else "device"

    def make(self, kind: str, args: tuple, kwargs: dict, meta_fn: Callable[..., Any], rng: Range,
             hint: str | None = None, space: str | None = None) -> Value | tuple[Value, ...]:
        """Get the result type — worked out directly in the plain cases (fast_types.py), else by running
        `meta_fn` on meta versions of args (memoised by input types, see meta_cache.py) — then record the op."""
        space = space or self.space_of(args + tuple(kwargs.values()), rng)
        metas, meta_kwargs = [_meta_arg(a) for a in args], {k: _meta_arg(v) for k, v in kwargs.items()}
        try:
            result = None if bypassing() else fast_types.result(kind, metas, meta_kwargs)
            if result is None:
                result = typed(meta_fn, metas, meta_kwargs)
        except (RuntimeError, TypeError, ValueError, IndexError) as exc:
            raise UserError("HPL105", f"{kind}: {_short(exc)}", rng) from None
        state = _int64_state(kind, args + tuple(kwargs.values()), kwargs, rng)
        if isinstance(result, tuple | list):
            outs = tuple(Value(_narrow(r), space, hint=hint, wide=r.dtype in _NARROW, from_int64=state) for r in result)
        elif isinstance(result, torch.Tensor):
            outs = Value(_narrow(result), space, hint=hint, wide=result.dtype in _NARROW, from_int64=state)
        else:
            raise UserError("HPL105", f"{kind} did not produce a tensor", rng)
        op = Op(rng, kind, tuple(args), dict(kwargs), outs)
        for o in op.outputs():
            o.producer = op
        self.emit(op)
        return outs

    # -- families ---------------------------------------------------------------------------------------

    def unary(self, name: str, x: Value, rng: Range) -> Value:
        fns = {
            "relu": torch.relu, "square": torch.square, "sigmoid": torch.sigmoid, "neg": torch.neg,
            "silu": torch.nn.functional.silu, "gelu": torch.nn.functional.gelu,
        }
        fn = fns.get(name) or getattr(torch, name)
        return self.make(name, (x,), {}, fn, rng)

    def binary(self, name: str, a: Any, b: Any, rng: Range) -> Value:
        if name == "matmul":
            return self.dot(a, b, None, None, rng)
        fn = {
            "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
            "floordiv": torch.floor_divide, "mod": torch.remainder, "pow": torch.pow, "eq": torch.eq,
            "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
            "and": torch.bitwise_and, "or": torch.bitwise_or, "xor": torch.bitwise_xor,
            "maximum": torch.maximum, "minimum": torch.minimum, "logical_and": torch.logical_and,
            "logical_or": torch.logical_or, "atan2": torch.atan2, "fmod": torch.fmod,
            "lshift": torch.bitwise_left_shift, "rshift": torch.bitwise_right_shift,
        }[name]
        _no_fp8_promotion(name, (a, b), rng)
        _no_wide_int_constant(name, (a, b), rng)
        if name in ("maximum", "minimum", "atan2") and not (isinstance(a, Value) and isinstance(b, Value)):
            # torch.maximum needs two tensors; a scalar operand broadcasts like in jnp
            return self.make(name, (a, b), {}, lambda x, y: fn(*_tensorize(x, y)), rng)
        return self.make(name, (a, b), {}, fn, rng)

    def where(self, cond: Any, a: Any, b: Any, rng: Range) -> Value:
        _no_fp8_promotion("where", (a, b), rng)
        return self.make("where", (cond, a, b), {}, lambda c, x, y: torch.where(*_tensorize3(c, x, y)), rng)

    def clamp(self, x: Value, lo: Any, hi: Any, rng: Range) -> Value:
        if isinstance(lo, Value) or isinstance(hi, Value):  # tensor bounds: max(x, lo) then min(., hi), as torch
            out = x if lo is None else self.binary("maximum", x, lo, rng)
            return out if hi is None else self.binary("minimum", out, hi, rng)
        return self.make("clamp", (x,), {"min": lo, "max": hi}, lambda t, min, max: torch.clamp(t, min, max), rng)

    def reduce(self, name: str, x: Value, dim: Any, keepdim: bool, rng: Range) -> Value | tuple[Value, ...]:
        if isinstance(dim, list):
            dim = tuple(dim)
        ndim = len(x.shape)
        if dim is not None:
            dims = dim if isinstance(dim, tuple) else (dim,)
            dims = tuple(_check_dim(d, ndim, name, rng) for d in dims)
            dim = dims if isinstance(dim, tuple) else dims[0]
        if name in ("max", "min") and dim is not None:
            fn = torch.amax if name == "max" else torch.amin
            values = self.make("amax" if name == "max" else "amin", (x,), {"dim": dim, "keepdim": keepdim},
                               lambda t, dim, keepdim: fn(t, dim, keepdim), rng)
            idx = self.make("argmax" if name == "max" else "argmin", (x,), {"dim": dim, "keepdim": keepdim},
                            lambda t, dim, keepdim: torch.argmax(t, dim, keepdim), rng)
            return values, idx
        fn = {"max": torch.amax, "min": torch.amin}.get(name) or getattr(torch, name)

        def meta(t, dim, keepdim):
            if dim is None:
                return fn(t)
            return fn(t, dim, keepdim=keepdim)

        return self.make(name if name not in ("max", "min") else "a" + name, (x,), {"dim": dim, "keepdim": keepdim},
                         meta, rng)

    def softmax(self, name: str, x: Value, dim: int, dtype: torch.dtype | None, rng: Range) -> Value:
        dim = _check_dim(dim, len(x.shape), name, rng)
        fn = torch.softmax if name == "softmax" else torch.log_softmax
        return self.make(name, (x,), {"dim": dim, "dtype": dtype}, lambda t, dim, dtype: fn(t, dim, dtype=dtype), rng)

    def scan(self, name: str, x: Value, dim: int, rng: Range, reverse: bool = False, same_dtype: bool = False) -> Value:
        """`torch.cumsum` / `torch.cumprod` along `dim` (an inclusive prefix combine); `hl.cumsum` / `hl.cumprod`
        keep the input's dtype (torch's promote integers to int64) and may run from the end (`reverse`)."""
        dim = _check_dim(dim, len(x.shape), name, rng)
        fn = torch.cumsum if name == "cumsum" else torch.cumprod

        def meta(t: torch.Tensor, dim: int, reverse: bool = False) -> torch.Tensor:
            out = fn(t, dim, dtype=t.dtype) if same_dtype else fn(t, dim)
            return out.flip(dim) if reverse else out

        return self.make(name, (x,), {"dim": dim, **({"reverse": True} if reverse else {})}, meta, rng)

    def roll(self, x: Value, shift: int, dim: int, rng: Range) -> Value:
        """`pltpu.roll`: element i moves to (i + shift) mod n along `dim` (a scan step's partners)."""
        return self.make("roll", (x,), {"shift": shift, "dim": dim}, lambda t, shift, dim: torch.roll(t, shift, dim), rng)

    def dot(self, a: Value, b: Value, acc: Value | None, out_dtype: torch.dtype | None, rng: Range) -> Value:
        if not (isinstance(a, Value) and isinstance(b, Value)):
            raise UserError("HPL105", "dot needs two tensors", rng)
        if len(a.shape) not in (2, 3) or len(b.shape) != len(a.shape):
            raise UserError("HPL105", f"dot supports 2-D or batched 3-D operands, got {list(a.shape)} @ {list(b.shape)}", rng)
        if acc is not None and out_dtype is None:
            out_dtype = acc.dtype
        if out_dtype is None:
            out_dtype = torch.promote_types(a.dtype, b.dtype)

        def meta(x, y, acc=None):
            r = torch.matmul(x.float(), y.float()).to(out_dtype)
            if acc is not None:
                r = r + acc
                if r.dtype != out_dtype:
                    r = r.to(out_dtype)
            return r

        args = (a, b) if acc is None else (a, b, acc)
        return self.make("dot", args, {"out_dtype": out_dtype}, lambda *t, out_dtype: meta(*t), rng)

    def cast(self, x: Value, dtype: torch.dtype, rng: Range) -> Value:
        return self.make("to", (x,), {"dtype": dtype}, lambda t, dtype: t.to(dtype), rng)

    def reshape(self, x: Value, shape: tuple[int, ...], rng: Range) -> Value:
        return self.make("reshape", (x,), {"shape": tuple(shape)}, lambda t, shape: t.reshape(shape), rng)

    def permute(self, x: Value, dims: tuple[int, ...], rng: Range) -> Value:
        n = len(x.shape)
        dims = tuple(d % n for d in dims)
        if sorted(dims) != list(range(n)):
            raise UserError("HPL105", f"permute: {list(dims)} is not a permutation of {n} dims", rng)
        return self.make("permute", (x,), {"dims": dims}, lambda t, dims: t.permute(dims), rng)

    def transpose(self, x: Value, d0: int, d1: int, rng: Range) -> Value:
        n = len(x.shape)
        if n == 0:
            raise UserError("HPL105", "cannot transpose a scalar", rng)
        dims = list(range(n))
        dims[d0 % n], dims[d1 % n] = dims[d1 % n], dims[d0 % n]
        return self.permute(x, tuple(dims), rng)

    def broadcast_to(self, x: Value, shape: tuple[int, ...], rng: Range) -> Value:
        return self.make("broadcast_to", (x,), {"shape": tuple(shape)}, lambda t, shape: t.expand(shape), rng)

    def index(self, x: Value, items: tuple, rng: Range) -> Value:
        """Value indexing with None / : / ... / ints (no gathers)."""
        return self.make("index", (x,), {"items": items}, lambda t, items: t[items], rng)

    def pad(self, x: Value, pad: tuple[int, ...], value: Any, rng: Range) -> Value:
        """`F.pad(x, (left, right, top, bottom, ...), value=v)`: widths given from the last dim backwards."""
        if len(pad) % 2 or len(pad) // 2 > len(x.shape):
            raise UserError("HPL105", f"pad: {len(pad)} widths do not fit a {len(x.shape)}-d tensor", rng)
        if any(p < 0 for p in pad):
            raise UserError("HPL101", "pad: negative widths (cropping) are not supported; index the tensor instead", rng)
        widths = [(0, 0)] * len(x.shape)
        for i in range(len(pad) // 2):
            widths[len(x.shape) - 1 - i] = (pad[2 * i], pad[2 * i + 1])
        return self.make("pad", (x,), {"widths": tuple(widths), "value": value},
                         lambda t, widths, value: torch.nn.functional.pad(t, pad, value=value), rng)

    def cat(self, name: str, tensors: tuple[Value, ...], dim: int, rng: Range) -> Value:
        """`torch.cat` / `torch.stack` of a tuple or list of tensors."""
        if not tensors or not all(isinstance(t, Value) for t in tensors):
            raise UserError("HPL103", f"torch.{name} takes a non-empty tuple or list of tensors", rng)
        fn = torch.cat if name == "cat" else torch.stack
        ndim = len(tensors[0].shape) + (name == "stack")
        dim = _check_dim(dim, ndim, name, rng)
        return self.make(name, (tuple(tensors),), {"dim": dim}, lambda ts, dim: fn(ts, dim), rng)

    def gather(self, x: Value, dim: int, index: Value, rng: Range) -> Value:
        """`torch.gather(x, dim, index)`: out[..., j, ...] = x[..., index[..., j, ...], ...] along `dim`."""
        if not isinstance(index, Value) or index.dtype.is_floating_point or index.dtype == torch.bool:
            raise UserError("HPL105", "gather: the index must be an integer tensor", rng)
        dim = _check_dim(dim, len(x.shape), "gather", rng)
        if len(index.shape) != len(x.shape) or any(
                a != b for k, (a, b) in enumerate(zip(index.shape, x.shape, strict=True)) if k != dim):
            raise UserError("HPL101", f"gather: the index {list(index.shape)} must match the input {list(x.shape)} in "
                                      f"every dim but {dim}", rng)
        return self.make("gather", (x, index), {"dim": dim},
                         lambda t, i, dim: torch.gather(t, dim, i.long()), rng)

    def topk(self, x: Value, k: int, dim: int, largest: bool, rng: Range) -> tuple[Value, Value]:
        dim = _check_dim(dim, len(x.shape), "topk", rng)
        if not 0 < k <= x.shape[dim]:
            raise UserError("HPL105", f"topk: k={k} is out of range for a dim of size {x.shape[dim]}", rng)
        if x.dtype == torch.bool:
            raise UserError("HPL105", "topk of a bool tensor is not supported", rng)
        out = self.make("topk", (x,), {"k": k, "dim": dim, "largest": largest},
                        lambda t, k, dim, largest: tuple(torch.topk(t, k, dim, largest)), rng)
        return out  # type: ignore[return-value]

    def rand(self, index: Value, seed: Any, rng: Range) -> Value:
        """Uniform [0, 1) floats from a counter-based hash of (seed, element index): `hl.rand`."""
        return self.make("rand", (index, seed), {}, lambda i, s: torch.empty(i.shape, dtype=torch.float32, device="meta"), rng)

    def full(self, shape: tuple[int, ...], value: Any, dtype: torch.dtype, rng: Range, space: str = "device",
             tiles: tuple | None = None, like: Value | None = None) -> Value:
        """A constant block; `tiles` (per dim, a TileDim or None) or `like` say which dims span tiles."""
        meta = torch.empty(shape, dtype=dtype, device="meta")
        out = Value(_narrow(meta), space, wide=dtype in _NARROW)
        kwargs = {"shape": tuple(shape), "value": value, "dtype": out.dtype}
        if tiles and any(t is not None for t in tiles):
            kwargs["tiles"] = tuple(tiles)
        if like is not None:
            kwargs["like"] = like
        op = Op(rng, "full", (), kwargs, out)
        out.producer = op
        self.emit(op)
        return out

    def arange(self, n: int, dtype: torch.dtype, offset: Any, rng: Range) -> Value:
        meta = torch.empty((n,), dtype=dtype, device="meta")
        out = Value(_narrow(meta), "device", wide=dtype in _NARROW)
        op = Op(rng, "iota", (offset,) if offset is not None else (), {"n": n, "dtype": out.dtype}, out)
        out.producer = op
        self.emit(op)
        return out

    def scalar(self, kind: str, args: tuple, rng: Range, dtype: torch.dtype = torch.int32) -> Value:
        """A scalar device value such as `pl.program_id(0) * 128` (tile begin/end/id)."""
        out = Value(torch.empty((), dtype=dtype, device="meta"), "device")
        op = Op(rng, kind, args, {}, out)
        out.producer = op
        self.emit(op)
        return out


def _check_dim(dim: Any, ndim: int, name: str, rng: Range) -> int:
    """A dim argument as torch accepts it: -ndim <= dim < ndim (a scalar accepts 0 and -1)."""
    if isinstance(dim, float) and name in ("max", "min"):  # `torch.max(scale, 1e-6)` (torch rejects it too)
        other = "maximum" if name == "max" else "minimum"
        bound = "min" if name == "max" else "max"
        raise UserError("HPL106", f"torch.{name}(x, {dim!r}): its second argument is a dim, not a number to compare "
                                  f"with (eager torch rejects a float there too); torch.clamp(x, {bound}={dim!r}) or "
                                  f"torch.{other} with a tensor compares", rng)
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise UserError("HPL106", f"{name}: dim must be a constant integer", rng)
    size = max(1, ndim)
    if not -size <= dim < size:
        raise UserError("HPL105", f"{name}: dim {dim} is out of range for a {ndim}-d tensor", rng)
    return dim % size


def _tensorize(x: Any, y: Any) -> tuple:
    if not isinstance(x, torch.Tensor):
        x = torch.tensor(x, device="meta", dtype=torch.result_type(y, x) if isinstance(y, torch.Tensor) else None)
    if not isinstance(y, torch.Tensor):
        y = torch.tensor(y, device="meta", dtype=torch.result_type(x, y))
    return x, y


def _tensorize3(c: Any, x: Any, y: Any) -> tuple:
    if not isinstance(x, torch.Tensor) and not isinstance(y, torch.Tensor):
        x = torch.tensor(x, device="meta")
        y = torch.tensor(y, device="meta")
    return c, x, y



def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:300]


_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)


def _no_wide_int_constant(name: str, args: tuple, rng: Range) -> None:
    """Integers on a TPU are 32-bit (int64 tensors are read as int32): arithmetic with an integer constant
    beyond int32 needs 64-bit integers, which the device does not have (jnp would fail to lower it)."""
    if not any(isinstance(a, Value) and not a.dtype.is_floating_point and a.dtype != torch.bool for a in args):
        return
    for a in args:
        c = _scalar_const(a)
        if isinstance(c, int) and not isinstance(c, bool) and not _INT32_MIN <= c <= _INT32_MAX:
            raise UserError("HPL108", f"{name} with the integer constant {c} needs 64-bit integers: TPUs have no 64-bit "
                                      "vector types (integer values on the device are int32)", rng)


_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1

# on integers read from int64 tensors as int32: ops whose low 32 bits are the same in 64-bit and 32-bit arithmetic
# (torch's and the device's results agree modulo 2**32), split into those that keep values in reach of int32 ...
_INT64_KEEPS = frozenset({"add", "sub", "neg", "and", "or", "xor", "reshape", "permute", "transpose", "broadcast_to",
                          "index", "cat", "stack", "pad", "where", "clone"})
# ... and those that can carry them past it (what torch then holds in 64 bits, the device wraps)
_INT64_GROWS = frozenset({"mul", "lshift", "pow", "square", "sum", "cumsum", "prod", "cumprod"})


def _int64_state(kind: str, args: tuple, kwargs: dict, rng: Range) -> str:
    """Whether an op's result holds integers read from an int64 tensor ("read"), or computed from them past what
    int32 may hold ("grown"). A grown value may only go where 32-bit wrapping matches torch's 64-bit result
    modulo 2**32 (more of the same ops, indices, a cast or store to int32); anything else (compare, divide,
    float, max...) would differ from torch once a value passes 2**31, so it is refused."""
    states = {a.from_int64 for a in flat(args) if isinstance(a, Value) and a.from_int64}
    if not states:
        return ""
    if kind in _INT64_GROWS:
        return "grown"
    if kind in _INT64_KEEPS:
        return "grown" if "grown" in states else "read"
    if kind == "to" and kwargs.get("dtype") == torch.int32:
        return ""
    if "grown" in states:
        raise int64_grown_error(f"`{kind}`", rng)
    return ""


def int64_grown_error(what: str, rng: Range) -> UserError:
    return UserError("HPL108", f"{what} of an integer computed with `*`, `<<` or a sum from int64 values, which the "
                               "device reads as int32 (TPUs have no 64-bit vector types): torch keeps 64 bits, the "
                               "device 32, so results differ past 2**31; use it only as an index or cast it to "
                               "torch.int32 first", rng)


def _scalar_const(a: Any) -> Any:
    return a.value if isinstance(a, NamedConst) else a


def _no_fp8_promotion(name: str, args: tuple, rng: Range) -> None:
    """torch refuses to promote an 8-bit float tensor with a tensor of another dtype (on real devices; its meta
    tensors wrongly allow it), and so does jnp: a diagnostic, not a result of the wrong dtype."""
    dtypes = {a.dtype for a in args if isinstance(a, Value) and a.shape}
    if len(dtypes) > 1 and any(d in _FP8 for d in dtypes):
        names = " and ".join(sorted(str(d).replace("torch.", "") for d in dtypes))
        raise UserError("HPL105", f"{name}: {names} do not promote (torch refuses 8-bit float promotion); convert "
                                  "one side with .to(...) first", rng)
