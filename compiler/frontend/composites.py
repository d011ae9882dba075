"""Pointwise torch functions that are compositions of basic ones (softplus, elu, hardswish, tanh-approximated
gelu, logaddexp, ...), decomposed here, as torch defines them, into ops the generated code spells directly —
the same set upstream Helion's Pallas backend reaches through Inductor's decompositions. Each costs a few
elementwise lines and lowers on any TPU.
"""

from __future__ import annotations

import math
from typing import Any

from ..ir.tile_ir import Value
from ..support.diagnostics import Range, UserError
from .ops import OpBuilder

_SELU_ALPHA = 1.6732632423543772
_SELU_SCALE = 1.0507009873554805
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)

UNARY_COMPOSITES = frozenset({
    "softplus", "elu", "selu", "celu", "leaky_relu", "hardtanh", "relu6", "hardsigmoid", "hardswish", "mish",
    "logsigmoid", "log_sigmoid", "softsign", "tanhshrink", "threshold", "sinh", "cosh", "log10", "erfc",
    "isfinite", "frac", "expit", "negative", "positive", "absolute",
})
BINARY_COMPOSITES = frozenset({"xlogy", "hypot", "logaddexp", "logaddexp2"})


def _param(args: list, kwargs: dict, i: int, name: str, default: Any, rng: Range) -> Any:
    value = args[i] if len(args) > i else kwargs.get(name, default)
    value = value.value if hasattr(value, "value") and not isinstance(value, Value) else value
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise UserError("HPL106", f"`{name}` must be a number known at compile time", rng)
    return value


def unary(ops: OpBuilder, name: str, x: Value, args: list, kwargs: dict, rng: Range) -> Value:
    """`name(x, *args, **kwargs)` for a name in UNARY_COMPOSITES (or gelu with approximate='tanh')."""
    b, u = ops.binary, ops.unary
    if name == "gelu":  # approximate="tanh"
        inner = b("mul", b("add", x, b("mul", b("mul", b("mul", x, x, rng), x, rng), 0.044715, rng), rng),
                  _SQRT_2_OVER_PI, rng)
        return b("mul", b("mul", x, 0.5, rng), b("add", u("tanh", inner, rng), 1.0, rng), rng)
    if name == "softplus":
        beta = _param(args, kwargs, 0, "beta", 1.0, rng)
        threshold = _param(args, kwargs, 1, "threshold", 20.0, rng)
        scaled = b("mul", x, beta, rng) if beta != 1 else x
        soft = u("log1p", u("exp", scaled, rng), rng)
        if beta != 1:
            soft = b("div", soft, beta, rng)
        return ops.where(b("gt", scaled, threshold, rng), x, soft, rng)
    if name in ("elu", "celu", "selu"):
        alpha = _SELU_ALPHA if name == "selu" else _param(args, kwargs, 0, "alpha", 1.0, rng)
        inside = b("div", x, alpha, rng) if name == "celu" and alpha != 1 else x
        out = ops.where(b("gt", x, 0, rng), x, b("mul", u("expm1", inside, rng), alpha, rng), rng)
        return b("mul", out, _SELU_SCALE, rng) if name == "selu" else out
    if name == "leaky_relu":
        slope = _param(args, kwargs, 0, "negative_slope", 0.01, rng)
        return ops.where(b("gt", x, 0, rng), x, b("mul", x, slope, rng), rng)
    if name == "hardtanh":
        return ops.clamp(x, _param(args, kwargs, 0, "min_val", -1.0, rng), _param(args, kwargs, 1, "max_val", 1.0, rng),
                         rng)
    if name == "relu6":
        return ops.clamp(x, 0.0, 6.0, rng)
    if name == "hardsigmoid":
        return b("div", ops.clamp(b("add", x, 3.0, rng), 0.0, 6.0, rng), 6.0, rng)
    if name == "hardswish":
        return b("mul", x, b("div", ops.clamp(b("add", x, 3.0, rng), 0.0, 6.0, rng), 6.0, rng), rng)
    if name == "mish":
        return b("mul", x, u("tanh", unary(ops, "softplus", x, [], {}, rng), rng), rng)
    if name in ("logsigmoid", "log_sigmoid"):  # min(x, 0) - log1p(exp(-|x|)): no overflow either way
        return b("sub", b("minimum", x, 0.0, rng), u("log1p", u("exp", u("neg", u("abs", x, rng), rng), rng), rng), rng)
    if name == "softsign":
        return b("div", x, b("add", u("abs", x, rng), 1.0, rng), rng)
    if name == "tanhshrink":
        return b("sub", x, u("tanh", x, rng), rng)
    if name == "threshold":
        limit = _param(args, kwargs, 0, "threshold", 0.0, rng)
        value = _param(args, kwargs, 1, "value", 0.0, rng)
        return ops.where(b("gt", x, limit, rng), x, value, rng)
    if name in ("sinh", "cosh"):
        e, en = u("exp", x, rng), u("exp", u("neg", x, rng), rng)
        return b("mul", b("sub" if name == "sinh" else "add", e, en, rng), 0.5, rng)
    if name == "log10":
        return b("mul", u("log", x, rng), 1.0 / math.log(10.0), rng)
    if name == "erfc":
        return b("sub", 1.0, u("erf", x, rng), rng)
    if name == "isfinite":
        return u("logical_not", b("logical_or", u("isnan", x, rng), u("isinf", x, rng), rng), rng)
    if name == "frac":
        return b("sub", x, u("trunc", x, rng), rng)
    if name == "expit":
        return u("sigmoid", x, rng)
    if name in ("negative",):
        return u("neg", x, rng)
    if name == "absolute":
        return u("abs", x, rng)
    return x  # positive


def binary(ops: OpBuilder, name: str, x: Value, other: Any, rng: Range) -> Value:
    """`name(x, other)` for a name in BINARY_COMPOSITES."""
    b, u = ops.binary, ops.unary
    if name == "xlogy":  # 0 where x == 0 (so 0 * log(0) is 0), but a NaN y stays NaN
        out = ops.where(b("eq", x, 0, rng), 0.0, b("mul", x, u("log", other, rng), rng), rng)
        return ops.where(u("isnan", other, rng), other, out, rng) if isinstance(other, Value) else out
    if name == "hypot":
        return u("sqrt", b("add", b("mul", x, x, rng), b("mul", other, other, rng), rng), rng)
    base2 = name == "logaddexp2"
    m = b("maximum", x, other, rng)
    d = u("neg", u("abs", b("sub", x, other, rng), rng), rng)
    if base2:
        return b("add", m, b("mul", u("log1p", u("exp2", d, rng), rng), 1.0 / math.log(2.0), rng), rng)
    return b("add", m, u("log1p", u("exp", d, rng), rng), rng)
