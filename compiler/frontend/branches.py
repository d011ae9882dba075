"""`if` on a value computed on the device (`if live >= 3:`, `if hi - lo > 8:`): both branches run, predicated.

A TPU core has no cheap divergent control flow in vector code, and a Helion kernel's branches on device scalars
are short, so each branch is traced into the enclosing region as it stands and its effects are kept only where
its condition holds: a store under the branch writes `where(pred, new, old)` (`Store.pred`, the conjunction of
the enclosing branches' conditions), and a name either branch assigns becomes `where(cond, then, else)` after
the `if`. Reads in the branch not taken run too and are discarded: loads stay inside their arrays (computed
positions are clamped), so nothing faults. `return`, `break` and `continue` under such a branch are refused.
May import the IR and frontend helpers only.
"""

from __future__ import annotations

import ast
import math
from typing import TYPE_CHECKING, Any

import torch

from ..ir.tile_ir import Value
from ..support.diagnostics import Range, UserError

if TYPE_CHECKING:
    from .tracer import Tracer

_MISSING = object()


def trace_device_if(t: Tracer, stmt: ast.If, cond: Value) -> None:
    """Trace `if cond: ... else: ...` for a one-element device tensor `cond`."""
    rng = Range.of(stmt.test)
    if cond.space != "device" or not t.in_device:
        raise UserError("HPL101", "`if` on a host tensor value is not supported; branch on sizes or use torch.where",
                        rng)
    if math.prod(cond.shape) != 1:
        raise UserError("HPL101", f"`if` on a tensor of shape {list(cond.shape)} is ambiguous (as in torch); reduce "
                                  "it with .any() / .all() or use torch.where", rng)
    for node in (n for s in stmt.body + stmt.orelse for n in ast.walk(s)):
        if isinstance(node, ast.Return | ast.Break | ast.Continue):
            raise UserError("HPL101", f"`{type(node).__name__.lower()}` under an `if` on a device value is not "
                                      "supported (both branches run, predicated)", Range.of(node))
    ops = t.ops
    c = ops.reshape(cond, (), rng) if cond.shape else cond
    c = c if c.dtype == torch.bool else ops.binary("ne", c, 0, rng)
    if c.hint is None:
        c.hint = "taken"
    outer = t.predicate
    before = dict(t.env)
    then_env = _branch(t, stmt.body, c, outer, rng)
    t.env = dict(before)
    else_env = _branch(t, stmt.orelse, ops.unary("logical_not", c, rng), outer, rng) if stmt.orelse else before
    merged: dict[str, Any] = {}
    for name in {**then_env, **else_env}:
        a, b = then_env.get(name, _MISSING), else_env.get(name, _MISSING)
        if a is _MISSING or b is _MISSING:
            continue  # bound on one path only: not usable after the `if`
        merged[name] = _merge(t, name, c, a, b, rng)
    t.env = merged


def _branch(t: Tracer, body: list[ast.stmt], cond: Value, outer: Value | None, rng: Range) -> dict[str, Any]:
    t.predicate = cond if outer is None else t.ops.binary("logical_and", outer, cond, rng)
    try:
        t.exec_block(body)
    finally:
        t.predicate = outer
    return t.env


def _merge(t: Tracer, name: str, cond: Value, a: Any, b: Any, rng: Range) -> Any:
    if a is b:
        return a
    if isinstance(a, Value) and isinstance(b, Value) and a.space == b.space == "device":
        if a.shape != b.shape or a.dtype != b.dtype:
            raise UserError("HPL105", f"`{name}` is {_describe(a)} after one branch of this `if` and {_describe(b)} "
                                      "after the other; on a device value both branches run, so they must agree", rng)
        out = t.ops.where(cond, a, b, rng)
        out.hint = name
        return out
    if not isinstance(a, Value) and not isinstance(b, Value):
        try:
            if type(a) is type(b) and bool(a == b):
                return a
        except Exception:  # noqa: BLE001 - a comparison a user's value does not support: treated as different
            pass
    raise UserError("HPL101", f"`{name}` gets a different compile-time value in each branch of an `if` on a device "
                              "value; only tensors can differ between its branches", rng)


def _describe(v: Value) -> str:
    return f"{str(v.dtype).removeprefix('torch.')}{list(v.shape)}"
