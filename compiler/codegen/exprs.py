"""How each IR op is spelled in jax.numpy. Returns (text, atomic): non-atomic text is parenthesised
when it is nested inside another expression."""

from __future__ import annotations

import math
from typing import Any

import torch

from ..frontend.values import NamedConst
from ..ir.tile_ir import Op, TileDim, Value
from .plan_builder import JNP_DTYPES

INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%", "pow": "**",
         "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "and": "&", "or": "|",
         "xor": "^", "lshift": "<<", "rshift": ">>"}
UNARY_FN = {
    "exp": "jnp.exp", "exp2": "jnp.exp2", "log": "jnp.log", "log2": "jnp.log2", "log1p": "jnp.log1p",
    "sqrt": "jnp.sqrt", "rsqrt": "jax.lax.rsqrt", "tanh": "jnp.tanh",
    "sigmoid": "jax.nn.sigmoid", "abs": "jnp.abs", "sin": "jnp.sin", "cos": "jnp.cos", "floor": "jnp.floor",
    "ceil": "jnp.ceil", "erf": "jax.lax.erf", "logical_not": "jnp.logical_not", "square": "jnp.square",
    "silu": "jax.nn.silu", "sign": "jnp.sign", "isnan": "jnp.isnan", "isinf": "jnp.isinf", "round": "jnp.round",
    "trunc": "jnp.trunc", "tan": "jnp.tan", "atan": "jnp.arctan", "bitwise_not": "jnp.bitwise_not",
}
BINARY_FN = {"maximum": "jnp.maximum", "minimum": "jnp.minimum", "logical_and": "jnp.logical_and",
             "logical_or": "jnp.logical_or", "atan2": "jnp.arctan2", "fmod": "jnp.fmod"}
REDUCE_FN = {"sum": "jnp.sum", "mean": "jnp.mean", "amax": "jnp.max", "amin": "jnp.min", "prod": "jnp.prod",
             "argmax": "jnp.argmax", "argmin": "jnp.argmin", "logsumexp": "jax.nn.logsumexp", "any": "jnp.any",
             "all": "jnp.all"}

# Helpers the generated module defines when it uses them (softmax is spelled out so it lowers anywhere).
HELPERS = {
    "expm1": (
        "def _expm1(x):\n"
        '    """exp(x) - 1 without cancellation near 0 (Kahan: (u - 1) * x / log(u)); jnp.expm1 has no TPU\n'
        '    lowering."""\n'
        "    u = jnp.exp(x)\n"
        "    um1 = u - 1.0\n"
        "    edge = (um1 == 0.0) | jnp.isinf(u) | (um1 == -1.0)\n"
        "    r = um1 * x / jnp.log(jnp.where(edge, 2.0, u))\n"
        "    return jnp.where(um1 == 0.0, x, jnp.where(edge, um1, r))\n"
    ),
    "dot_bf16x3": (
        "def _dot_bf16x3(a, b):\n"
        '    """An f32 product (2-D, or batched 3-D) as three bf16 MXU passes with f32 sums, hi*hi + (hi*lo + lo*hi):\n'
        "    ~16 significant bits, more than the tf32 that dot_precision='tf32' asks for (a TPU's default f32 dot\n"
        '    is one bf16 pass; Mosaic has no Precision.HIGH)."""\n'
        "    a, b = a.astype(jnp.float32), b.astype(jnp.float32)\n"
        "    a_hi, b_hi = a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)\n"
        "    a_lo = (a - a_hi.astype(jnp.float32)).astype(jnp.bfloat16)\n"
        "    b_lo = (b - b_hi.astype(jnp.float32)).astype(jnp.bfloat16)\n"
        "    spell = jnp.dot if a.ndim == 2 else functools.partial(jnp.einsum, \"bmk,bkn->bmn\")\n"
        "    dot = functools.partial(spell, precision=jax.lax.Precision.DEFAULT, preferred_element_type=jnp.float32)\n"
        "    return dot(a_hi, b_hi) + (dot(a_hi, b_lo) + dot(a_lo, b_hi))\n"
    ),
    "softmax": (
        "def _softmax(x, axis):\n"
        "    e = jnp.exp(x - jnp.max(x, axis=axis, keepdims=True))\n"
        "    return e / jnp.sum(e, axis=axis, keepdims=True)\n"
    ),
    "log_softmax": (
        "def _log_softmax(x, axis):\n"
        "    shifted = x - jnp.max(x, axis=axis, keepdims=True)\n"
        "    return shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=axis, keepdims=True))\n"
    ),
    "prefix": (
        "def _prefix(x, axis, combine, identity, reverse=False):\n"
        '    """Inclusive scan along `axis` (torch.cumsum / cumprod; hl.cumsum / cumprod, from the end when `reverse`) in\n'
        "    log2(n) steps, each combining every element with the one `shift` before it (after it), rotated in by\n"
        "    pltpu.roll (jnp.cumsum has no TPU lowering).\"\"\"\n"
        "    n = x.shape[axis]\n"
        "    pos = jax.lax.broadcasted_iota(jnp.int32, x.shape, axis)\n"
        "    shift = 1\n"
        "    while shift < n:\n"
        "        partner = pltpu.roll(x, n - shift if reverse else shift, axis)\n"
        "        x = combine(x, jnp.where(pos < n - shift if reverse else pos >= shift, partner, identity))\n"
        "        shift *= 2\n"
        "    return x\n"
    ),
    "topk": (
        "def _topk(x, k, axis, largest):\n"
        "    \"\"\"torch.topk by k rounds of max (TPUs have no sort): values and indices, best first. Like torch,\n"
        "    NaN ranks above every number; ties go to the lowest index.\"\"\"\n"
        "    x = jnp.moveaxis(x, axis, -1)\n"
        "    n = x.shape[-1]\n"
        "    floating = jnp.issubdtype(x.dtype, jnp.floating)\n"
        "    worst = -jnp.inf if floating else jnp.iinfo(x.dtype).min\n"
        "    nan = jnp.isnan(x) if floating else jnp.zeros(x.shape, jnp.bool_)\n"
        "    key = jnp.where(nan, 0, x if largest else (-x if floating else ~x))\n"
        "    first = jnp.where(nan if largest else ~nan, 1, 0)  # picked before the rest\n"
        "    lanes = jax.lax.broadcasted_iota(jnp.int32, x.shape, x.ndim - 1)\n"
        "    slots = jax.lax.broadcasted_iota(jnp.int32, x.shape[:-1] + (k,), x.ndim - 1)\n"
        "\n"
        "    def pick(i, carry):\n"
        "        taken, values, indices = carry  # taken: 1 where an element was already picked\n"
        "        free = 1 - taken\n"
        "        preferred = free * first\n"
        "        pool = jnp.where(jnp.max(preferred, axis=-1, keepdims=True) > 0, preferred, free) > 0\n"
        "        best = jnp.max(jnp.where(pool, key, worst), axis=-1, keepdims=True)\n"
        "        j = jnp.min(jnp.where(pool & (key == best), lanes, n), axis=-1, keepdims=True)\n"
        "        hit = lanes == j\n"
        "        value = jnp.max(jnp.where(hit, x, worst), axis=-1, keepdims=True)\n"
        "        if floating:\n"
        "            value = jnp.where(jnp.max(jnp.where(hit & nan, 1, 0), axis=-1, keepdims=True) > 0, jnp.nan, value)\n"
        "        taken = jnp.where(hit, 1, taken)\n"
        "        return taken, jnp.where(slots == i, value, values), jnp.where(slots == i, j, indices)\n"
        "\n"
        "    values = jnp.zeros(x.shape[:-1] + (k,), x.dtype)\n"
        "    indices = jnp.zeros(x.shape[:-1] + (k,), jnp.int32)\n"
        "    _, values, indices = jax.lax.fori_loop(0, k, pick, (jnp.zeros(x.shape, jnp.int32), values, indices))\n"
        "    return jnp.moveaxis(values, -1, axis), jnp.moveaxis(indices, -1, axis)\n"
    ),
    "rand": (
        "def _uniform(index, seed):\n"
        "    \"\"\"hl.rand: uniform [0, 1) floats from a 32-bit integer hash of (seed, element index) - plain integer\n"
        "    vector ops, so it runs on any TPU and in interpret mode, and does not depend on block sizes.\"\"\"\n"
        "    h = index * jnp.int32(-1640531535) + jnp.int32(seed) * jnp.int32(668265263)\n"
        "    h = h ^ jax.lax.shift_right_logical(h, 16)\n"
        "    h = h * jnp.int32(0x7FEB352D)\n"
        "    h = h ^ jax.lax.shift_right_logical(h, 15)\n"
        "    h = h * jnp.int32(-2073254261)\n"
        "    h = h ^ jax.lax.shift_right_logical(h, 16)\n"
        "    return jax.lax.shift_right_logical(h, 8).astype(jnp.float32) * (1.0 / 16777216.0)\n"
    ),
}


def dtype_text(dtype: torch.dtype) -> str:
    return f"jnp.{JNP_DTYPES[dtype]}"


def cast_text(x: str, atomic: bool, src: torch.dtype, dst: torch.dtype) -> str:
    """`x` (of `src`) as `dst`, with torch's rounding of a float too large for float8_e4m3fn: torch saturates it
    to +-448 (inf too; NaN stays NaN), a plain jnp cast makes it NaN (vLLM's static fp8 quantizer casts
    without a clamp)."""
    x = x if atomic else f"({x})"
    if dst == torch.float8_e4m3fn and src.is_floating_point and src != dst:
        return f"jnp.clip({x}, -448.0, 448.0).astype({dtype_text(dst)})"
    return f"{x}.astype({dtype_text(dst)})"


def literal(v: Any) -> str:
    if isinstance(v, bool):
        return repr(v)
    if isinstance(v, float):
        if math.isinf(v):
            return "jnp.inf" if v > 0 else "-jnp.inf"
        if math.isnan(v):
            return "jnp.nan"
        return repr(v)
    if isinstance(v, NamedConst):
        return v.name
    if isinstance(v, torch.dtype):
        return dtype_text(v)
    if isinstance(v, tuple):
        return "(" + ", ".join(literal(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    return repr(v)


def _rounds_scalar(scalar: Any, dtype: torch.dtype) -> bool:
    """Does `tensor * scalar` (or `/`) of a bf16/f16 tensor need the scalar unrounded? torch computes it in
    f32 with the Python float as it is and rounds the result once; jnp would first round the scalar to the
    tensor's dtype (attention's 1/sqrt(d)*log2(e) = 0.18034 becomes 0.18066: every score 0.2% off). Only a
    float that the dtype does not hold exactly (a scalar kernel argument: any float) is affected."""
    if dtype not in (torch.bfloat16, torch.float16):
        return False
    value = scalar.value if isinstance(scalar, NamedConst) else scalar
    if not isinstance(value, float) or isinstance(value, bool) or not math.isfinite(value):
        return False
    return (isinstance(scalar, NamedConst) and scalar.is_arg) or float(torch.tensor(value, dtype=dtype)) != value


def _cast_scalar(value: Any, dtype: torch.dtype) -> Any:
    """A fill value as the tensor's dtype holds it (an int tensor padded with 1.0 holds 1)."""
    if dtype.is_floating_point or isinstance(value, bool) or not isinstance(value, float) or not math.isfinite(value):
        return value
    return int(value)


def _index_text(items: tuple) -> str:
    parts = []
    for it in items:
        if it is None:
            parts.append("None")
        elif it is Ellipsis:
            parts.append("...")
        elif isinstance(it, slice):
            parts.append(_slice_text(it))
        else:
            parts.append(str(it))
    return ", ".join(parts) or "..."


def _slice_text(s: slice) -> str:
    text = ("" if s.start in (None, 0) else str(s.start)) + ":" + ("" if s.stop is None else str(s.stop))
    return text + (f":{s.step}" if s.step not in (None, 1) else "")


class ExprWriter:
    """Spells ops; `ref(value)` gives the text of an operand (a name or an inlined expression)."""

    def __init__(self, ref, tile_begin):
        self.ref = ref
        self.tile_begin = tile_begin
        self.helpers: set[str] = set()

    def arg(self, a: Any, nested: bool = True) -> str:
        if isinstance(a, Value):
            text, atomic = self.ref(a)
            return text if atomic or not nested else f"({text})"
        return literal(a)

    def operand(self, a: Any, out: Value, nested: bool = True) -> str:
        """An operand of an elementwise op. A 0-d device value of another dtype than the result is cast to it
        first: torch computes in the result's dtype (a 0-d tensor does not promote a tensor of its kind), while
        jnp promotes a scalar like an array (bf16 block * f32 scale would be f32, an fp8 scale an error)."""
        if isinstance(a, Value) and not a.shape and a.dtype != out.dtype and out.dtype != torch.bool:
            return f"{self.arg(a)}.astype({dtype_text(out.dtype)})"
        return self.arg(a, nested)

    def op(self, op: Op) -> tuple[str, bool]:
        k, a, kw = op.kind, op.args, op.kwargs
        out = op.outputs()[0]
        if k in INFIX:
            widen = None
            if k in ("mul", "div") and _rounds_scalar(a[1] if k == "div" else a[0] if not isinstance(a[0], Value) else a[1],
                                                     out.dtype):
                widen = "jnp.float32"
            elif k in ("lshift", "rshift") and out.dtype.itemsize < 4 and not out.dtype.is_floating_point:
                # Mosaic legalizes no shift of 8- or 16-bit vectors (libtpu for v5e, as the chip: int4 unpacking):
                # shift in int32, then wrap back as torch's narrow shift does
                widen = "jnp.int32"
            if widen is not None:
                wide = [f"{self.arg(x)}.astype({widen})" if isinstance(x, Value) else self.arg(x) for x in a]
                return f"({wide[0]} {INFIX[k]} {wide[1]}).astype({dtype_text(out.dtype)})", True
            return f"{self.operand(a[0], out)} {INFIX[k]} {self.operand(a[1], out)}", False
        if k == "neg":
            return f"-{self.arg(a[0])}", False
        if k == "relu":
            return f"jnp.maximum({self.arg(a[0], False)}, 0)", True
        if k == "reciprocal":
            return f"1.0 / {self.arg(a[0])}", False
        if k == "gelu":  # exact gelu through erf (jax.nn.gelu goes through erfc, which TPUs cannot lower)
            x = self.arg(a[0])
            return f"0.5 * {x} * (1.0 + jax.lax.erf({x} * {1 / math.sqrt(2.0)!r}))", False
        if k == "expm1":  # jnp.expm1 has no TPU lowering
            self.helpers.add("expm1")
            return f"_expm1({self.arg(a[0], False)})", True
        if k in UNARY_FN:
            return f"{UNARY_FN[k]}({self.arg(a[0], False)})", True
        if k in BINARY_FN:
            return f"{BINARY_FN[k]}({self.operand(a[0], out, False)}, {self.operand(a[1], out, False)})", True
        if k == "where":
            cond = self.arg(a[0], False)
            if isinstance(a[0], Value) and len(a[0].shape) >= 3 and tuple(a[0].shape) != tuple(out.shape):
                # Mosaic cannot relayout a broadcast of a 3-d mask (vLLM's fused QK norm + RoPE: "Invalid relayout
                # ... vector<1x24x128xi1>"): the mask is broadcast as int32, then compared
                cond = f"(jnp.broadcast_to({self.arg(a[0])}.astype(jnp.int32), {literal(tuple(out.shape))}) != 0)"
                if out.dtype.is_floating_point and out.dtype.itemsize < 4:  # a 32-bit mask selects 32-bit values
                    wide = [f"jnp.asarray({self.operand(x, out, False)}).astype(jnp.float32)" for x in a[1:3]]
                    return f"jnp.where({cond}, {wide[0]}, {wide[1]}).astype({dtype_text(out.dtype)})", True
            elif isinstance(a[0], Value) and len(out.shape) >= 2 and out.shape[-2] == 1 \
                    and out.dtype.is_floating_point and out.dtype.itemsize < 4:
                # one row of 16-/8-bit values under a mask (vLLM's silu_and_mul quant, a masked load of a row: v5e
                # "Not implemented: Sublane broadcast"): selected in float32, which holds each value exactly
                wide = [f"jnp.asarray({self.operand(x, out, False)}).astype(jnp.float32)" for x in a[1:3]]
                return f"jnp.where({cond}, {wide[0]}, {wide[1]}).astype({dtype_text(out.dtype)})", True
            return f"jnp.where({cond}, {self.operand(a[1], out, False)}, " \
                   f"{self.operand(a[2], out, False)})", True
        if k == "clamp":
            return f"jnp.clip({self.arg(a[0], False)}, {literal(kw['min'])}, {literal(kw['max'])})", True
        if k == "mask":
            return self.mask(op)
        if k == "mean" and kw.get("valid"):
            return self.masked_mean(op)
        if k in REDUCE_FN:
            dim = kw.get("dim")
            extra = "" if dim is None else f", axis={literal(dim)}"
            if kw.get("keepdim") and dim is not None:
                extra += ", keepdims=True"
            x = self.arg(a[0], False)
            if k in ("amax", "amin") and len(out.shape) == 0 and a[0].dtype.is_floating_point \
                    and a[0].dtype.itemsize < 4:  # Mosaic makes scalars of 32-bit vectors only; max/min are exact
                x, text = self.arg(a[0]), None
                text = f"{REDUCE_FN[k]}({x}.astype(jnp.float32){extra}).astype({dtype_text(a[0].dtype)})"
            else:
                text = f"{REDUCE_FN[k]}({x}{extra})"
            if k in ("argmax", "argmin") or out.dtype != a[0].dtype and k not in ("any", "all"):
                text += f".astype({dtype_text(out.dtype)})"
            return text, True
        if k == "roll":
            return f"pltpu.roll({self.arg(a[0])}, {kw['shift']}, {kw['dim']})", True
        if k == "scan_valid":  # its argument, masked where the scanned dim holds padding (masks.py)
            return self.arg(a[0]), True
        if k in ("cumsum", "cumprod"):
            self.helpers.add("prefix")
            x = self.arg(a[0])
            if a[0].dtype != out.dtype:
                x = f"{x}.astype({dtype_text(out.dtype)})"
            combine, identity = ("jnp.add", 0) if k == "cumsum" else ("jnp.multiply", 1)
            reverse = ", reverse=True" if kw.get("reverse") else ""
            return f"_prefix({x}, {kw['dim']}, {combine}, {identity}{reverse})", True
        if k in ("softmax", "log_softmax"):
            self.helpers.add(k)
            x = self.arg(a[0])
            compute = a[0].dtype if a[0].dtype == torch.float32 else torch.float32
            if a[0].dtype != compute:
                x = f"{x}.astype({dtype_text(compute)})"
            text = f"_{k}({x}, axis={kw['dim']})"
            if out.dtype != compute:
                text += f".astype({dtype_text(out.dtype)})"
            return text, True
        if k == "dot":
            return self.dot(op)
        if k == "to":
            src = a[0].dtype if isinstance(a[0], Value) else torch.float32
            return cast_text(self.arg(a[0]), True, src, kw["dtype"]), True
        if k == "reshape":
            if out.dtype == torch.bool and tuple(out.shape) != tuple(a[0].shape):  # Mosaic: no i1 shape casts
                return f"({self.arg(a[0])}.astype(jnp.int32).reshape{literal(tuple(out.shape))} != 0)", True
            return f"{self.arg(a[0])}.reshape{literal(tuple(out.shape))}", True
        if k == "permute":
            dims = kw["dims"]
            swapped = [i for i, d in enumerate(dims) if d != i]
            if len(swapped) == 2:
                return f"jnp.swapaxes({self.arg(a[0], False)}, {swapped[0]}, {swapped[1]})", True
            return f"jnp.transpose({self.arg(a[0], False)}, {literal(tuple(dims))})", True
        if k == "broadcast_to":
            return f"jnp.broadcast_to({self.arg(a[0], False)}, {literal(tuple(out.shape))})", True
        if k == "index":
            if len(out.shape) >= 3 and all(n == 1 for n in out.shape) and isinstance(a[0], Value) and \
                    (a[0].dtype == torch.bool or a[0].dtype.itemsize == 4):
                # one element made [1, 1, 1, 1] (`(g < n)[:, None, None, None]` of a one-row tile): its scalar
                # spread over that shape; Mosaic broadcasts such a vector no further (libtpu for v5e: "Not
                # implemented: Lane broadcast" against a [1, 512, 64, 1] block), a scalar's splat it does
                wide = f"{self.arg(a[0])}.astype(jnp.int32)" if out.dtype == torch.bool else self.arg(a[0])
                text = f"jnp.broadcast_to({wide}.reshape(()), {literal(tuple(out.shape))})"
                return (f"({text} != 0)" if out.dtype == torch.bool else text), True
            if out.dtype == torch.bool and len(out.shape) != len(a[0].shape):  # Mosaic: no i1 shape casts
                return f"({self.arg(a[0])}.astype(jnp.int32)[{_index_text(kw['items'])}] != 0)", True
            return f"{self.arg(a[0])}[{_index_text(kw['items'])}]", True
        if k == "take":
            return f"{self.arg(a[0])}[{self._items(a[1])}]", True
        if k == "index_put":
            value = self.arg(a[2], False)
            if isinstance(a[2], Value) and a[2].dtype != out.dtype:
                value = f"{self.arg(a[2])}.astype({dtype_text(out.dtype)})"
            return f"{self.arg(a[0])}.at[{self._items(a[1])}].set({value})", True
        if k == "full":
            shape, value, dtype = literal(tuple(kw["shape"])), kw["value"], dtype_text(kw["dtype"])
            if value == 0:
                return f"jnp.zeros({shape}, {dtype})", True
            return f"jnp.full({shape}, {literal(value)}, {dtype})", True
        if k == "pad":
            return (f"jnp.pad({self.arg(a[0], False)}, {literal(kw['widths'])}, "
                    f"constant_values={literal(_cast_scalar(kw['value'], out.dtype))})"), True
        if k in ("cat", "stack"):
            parts = [self.arg(t, False) if t.dtype == out.dtype else f"{self.arg(t)}.astype({dtype_text(out.dtype)})"
                     for t in a[0]]
            fn = "jnp.concatenate" if k == "cat" else "jnp.stack"
            return f"{fn}(({', '.join(parts)}{',' if len(parts) == 1 else ''}), axis={kw['dim']})", True
        if k == "gather":
            return f"jnp.take_along_axis({self.arg(a[0], False)}, {self.arg(a[1], False)}, axis={kw['dim']})", True
        if k == "topk":
            self.helpers.add("topk")
            return f"_topk({self.arg(a[0], False)}, {kw['k']}, {kw['dim']}, {kw['largest']})", True
        if k == "rand":
            self.helpers.add("rand")
            return f"_uniform({self.arg(a[0], False)}, {self.arg(a[1], False)})", True
        if k == "clone":  # jax arrays are values: the pallas_call that writes the clone aliases a copy
            return self.arg(a[0], False), True
        if k == "alloc":
            shape, dtype = literal(tuple(kw["shape"])), dtype_text(kw["dtype"])
            if kw["init"] in ("empty", "zeros") or kw["value"] == 0:
                return f"jnp.zeros({shape}, {dtype})", True
            return f"jnp.full({shape}, {literal(kw['value'])}, {dtype})", True
        if k == "iota":
            n = kw["n"]
            text = f"jax.lax.broadcasted_iota({dtype_text(kw['dtype'])}, ({n},), 0)"
            if a:
                _, dim = a[0]
                return f"{self.tile_begin(dim)} + {text}", False
            return text, True
        if k in ("tile_begin", "tile_end", "tile_id"):
            dim: TileDim = a[0]
            begin = self.tile_begin(dim, first=True) if k != "tile_id" else self.tile_begin(dim, as_id=True)
            if k == "tile_end":
                end = f"{begin} + {dim.block_size}"
                if dim.partial:
                    return f"jnp.minimum({end}, {self.tile_limit(dim)})", True
                return end, False
            return begin, " " not in begin
        raise NotImplementedError(f"no jnp spelling for op {k!r}")

    def tile_limit(self, dim: TileDim) -> str:
        """Where a tile's valid range ends (exclusive): its loop's end (a device value for a device-bounded
        loop); a sub-tile's is its grid tile's."""
        if dim.dynamic:
            return self.arg(dim.hi)
        return self.tile_limit(dim.parent) if dim.parent is not None else str(dim.extent)

    def valid_count(self, dim: TileDim) -> str:
        """Valid elements in the current block of a partial tile (at least 1, so a mean never divides by 0)."""
        return f"jnp.clip({self.tile_limit(dim)} - ({self.tile_begin(dim, first=True)}), 1, {dim.block_size})"

    def valid(self, dim: TileDim, shape: tuple[int, ...], axis: int, lanes: tuple[int, ...] | None = None) -> str:
        """Which positions of a block along `axis` lie in the tile's range. A device-bounded loop's window may
        start before this step's first position (it is clamped inside the array): those belong to the step
        before (or to another segment) and are invalid too; when a range starts before 0 the window is
        clamped up to 0, and its positions past this step's block belong to the next step (positions before 0
        do not exist and are read by no step). A jagged tile's positions lie below their lane's end too, when
        `lanes` names the block's axes its per-lane ends run along."""
        window, first = self.tile_begin(dim), self.tile_begin(dim, first=True)
        at = f"{window} + jax.lax.broadcasted_iota(jnp.int32, {literal(shape)}, {axis})"
        if not dim.dynamic:
            return f"{at} < {self.tile_limit(dim)}"
        text = f"({at} >= {first}) & ({at} < {self.tile_limit(dim)})"
        if window != first:
            text += f" & ({at} < {first} + {dim.block_size})"
        if lanes is not None and dim.lanes is not None:
            ends = tuple(shape[i] if i in lanes else 1 for i in range(len(shape)))
            text += f" & ({at} < {self.arg(dim.lanes)}.reshape({literal(ends)}))"
        return text

    def mask(self, op: Op) -> tuple[str, bool]:
        """`where(valid, x, fill)`: positions past a partial tile's end (and blocks wholly past it) read `fill`."""
        x, fill = op.args
        shape = tuple(op.outputs()[0].shape)
        lanes = op.kwargs.get("lanes") or (None,) * len(op.kwargs["dims"])
        conds = [self.valid(d, shape, axis, ln) for (axis, d), ln in zip(op.kwargs["dims"], lanes, strict=True)]
        conds += [f"{self.tile_begin(d, first=True)} < {self.tile_limit(d)}" for d in op.kwargs["live"]]
        cond = conds[0] if len(conds) == 1 else " & ".join(f"({c})" for c in conds)
        return f"jnp.where({cond}, {self.arg(x, False)}, {self.arg(fill, False)})", True

    def masked_mean(self, op: Op) -> tuple[str, bool]:
        """A mean over partial tiles divides the (masked) sum by the valid count, not the block."""
        x, kw = op.args[0], op.kwargs
        out = op.outputs()[0]
        dims = kw["dim"]
        axes = set(range(len(x.shape))) if dims is None else {
            d % len(x.shape) for d in (dims if isinstance(dims, tuple | list) else (dims,))}
        valid = kw["valid"]
        fixed = math.prod(x.shape[i] for i in axes) // math.prod(d.block_size for d in valid)
        count = " * ".join([str(fixed)] * (fixed != 1) + [self.valid_count(d) for d in valid])
        extra = "" if dims is None else f", axis={literal(dims)}" + (", keepdims=True" if kw.get("keepdim") else "")
        compute = out.dtype if out.dtype.is_floating_point else torch.float32
        text = f"jnp.sum({self.arg(x, False)}{extra}) / ({count}).astype({dtype_text(compute)})"
        if compute != out.dtype:
            return f"({text}).astype({dtype_text(out.dtype)})", True
        return text, False

    def _items(self, items: tuple) -> str:
        return ", ".join(self.arg(it, False) if isinstance(it, Value) else _index_text((it,)) for it in items)

    def dot(self, op: Op) -> tuple[str, bool]:
        """A dot names its precision (frontend/dot_precision.py): a TPU's default for an f32 dot is one bf16
        pass, far from what torch computes."""
        a, b = op.args[0], op.args[1]
        acc = op.args[2] if len(op.args) > 2 else None
        out = op.outputs()[0]
        nd = len(a.shape)
        compute = torch.float32 if out.dtype.is_floating_point else torch.int32
        plan = op.kwargs["precision"]
        operands = f"{self.arg(a, False)}, {self.arg(b, False)}"
        if plan == "bf16x3":
            self.helpers.add("dot_bf16x3")
            text = f"_dot_bf16x3({operands})"
        else:
            precision = f"precision=jax.lax.Precision.{'HIGHEST' if plan == 'highest' else 'DEFAULT'}"
            spell = "jnp.dot(" if nd == 2 else 'jnp.einsum("bmk,bkn->bmn", '
            text = f"{spell}{operands}, {precision}, preferred_element_type={dtype_text(compute)})"
        if acc is not None:
            text = f"{self.arg(acc)} + {text}"
            if out.dtype != compute:
                return f"({text}).astype({dtype_text(out.dtype)})", True
            return text, False
        if out.dtype != compute:
            return f"{text}.astype({dtype_text(out.dtype)})", True
        return text, True
