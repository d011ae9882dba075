"""Scans in kernels. `hl.cumsum` / `hl.cumprod` are torch's cumsum/cumprod ops (with `reverse`, in the input's
dtype). `hl.associative_scan(combine_fn, input, dim, reverse=False)`: an inclusive scan with the user's combine
function, traced into log2(n) steps of existing ops (TPUs have no scan instruction; `jnp` scans do not lower);
`hl.reduce(combine_fn, input, dim, other, keep_dims)`: the same scan's last position.

Step `shift` (1, 2, 4, ...) combines every position with the one `shift` before it (after it, in reverse),
rotated in by `pltpu.roll`; the partner is the left operand, as in upstream Helion, whose reverse scan is the
scan of the flipped dim (`f(x[n-1], x[n-2])`, ...). A combine function has no identity to pad with, so each
position carries a validity flag as well: a position whose tile holds padding there (a ragged tile, a
device-bounded window starting before its rows; `scan_valid`, masked by masks.py) takes part in no combine,
and a pair combines only when both sides are valid — `(a, fa) + (b, fb) = (fa & fb ? a + b : fa ? a : b, fa | fb)`, which is
associative whenever the combine function is. Valid positions get the scan of the valid positions up to them.

A reduction is the scan's last position: it holds the combination of every valid position (padding passes the
running value on), or `other` where the dim had none.

The combine function is called as upstream Helion calls it: `f(left, right)` for one tensor; for a tuple,
`f(left_tuple, right_tuple)` when it has fewer than four parameters, else `f(*left, *right)`.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

import torch

from ..ir.tile_ir import Value
from ..support.diagnostics import Range, UserError
from .static_args import as_int, unwrap
from .values import Closure

if TYPE_CHECKING:
    from .dispatch import Dispatcher


# torch's own scan, which upstream Helion replaces by hl.associative_scan in kernels (same arguments, `xs` for
# the input; its combine_mode does not change the result)
TORCH_SCANS = frozenset({"torch._higher_order_ops.associative_scan",
                         "torch._higher_order_ops.associative_scan.associative_scan"})


def cumulative(d: Dispatcher, name: str, args: list, kwargs: dict, rng: Range) -> Value:
    """`hl.cumsum(x, dim, reverse=False)` / `hl.cumprod`: torch's scan op in x's own dtype, from the end of `dim`
    when `reverse` (upstream: `hl.associative_scan(torch.add / torch.mul, x, dim, reverse)`)."""
    x = args[0] if args else kwargs.get("input_tensor")
    if not isinstance(x, Value):
        raise UserError("HPL103", f"hl.{name}(input_tensor, dim, reverse=False) scans a tensor", rng)
    dim, reverse = _dim_and_reverse(name, args, kwargs, 1, rng)
    return d.ops.scan(name, x, dim, rng, reverse=reverse, same_dtype=True)


def associative_scan(d: Dispatcher, args: list, kwargs: dict, rng: Range) -> Value | tuple[Value, ...]:
    combine, xs, several = _inputs("associative_scan", args, kwargs, rng)
    dim, reverse = _dim_and_reverse("associative_scan", args, kwargs, 2, rng)
    xs, _ = _scan(d, combine, xs, _dim("associative_scan", dim, xs[0], rng), reverse, several, rng)
    return xs if several else xs[0]


def reduce(d: Dispatcher, args: list, kwargs: dict, rng: Range) -> Value | tuple[Value, ...]:
    """`hl.reduce(combine_fn, input_tensor, dim=None, other=0, keep_dims=False)`."""
    combine, xs, several = _inputs("reduce", args, kwargs, rng)
    dim = unwrap(args[2] if len(args) > 2 else kwargs.get("dim"))
    other = unwrap(args[3] if len(args) > 3 else kwargs.get("other", 0))
    keep = unwrap(args[4] if len(args) > 4 else kwargs.get("keep_dims", False))
    others = tuple(other) if isinstance(other, tuple | list) else (other,) * len(xs)
    if len(others) != len(xs) or not all(isinstance(o, int | float | bool) for o in others):
        raise UserError("HPL106", "hl.reduce: other must be a number (a tuple of one per tensor for a tuple)", rng)
    if isinstance(dim, Value) or not isinstance(keep, bool):
        raise UserError("HPL103", "hl.reduce needs a constant dim (or None) and keep_dims", rng)
    dims = range(len(xs[0].shape)) if dim is None else [_dim("reduce", dim, xs[0], rng)]
    for axis in sorted(dims, reverse=True):  # the last dim first: the others keep their positions
        scanned, valid = _scan(d, combine, xs, axis, False, several, rng)
        ndim = len(xs[0].shape)
        # the last position, by an int index: a size-1 slice would still look like the (partial) tile's dim
        pick = tuple(xs[0].shape[axis] - 1 if i == axis else slice(None) for i in range(ndim))
        last_valid = d.ops.binary("ne", d.ops.index(valid, pick, rng), 0, rng)
        xs = tuple(d.ops.where(last_valid, d.ops.index(x, pick, rng), o, rng) for x, o in zip(scanned, others,
                                                                                             strict=True))
        if keep:
            xs = tuple(d.ops.index(x, tuple(None if i == axis else slice(None) for i in range(ndim)), rng)
                       for x in xs)
    return xs if several else xs[0]


def _inputs(what: str, args: list, kwargs: dict, rng: Range) -> tuple[Any, tuple[Value, ...], bool]:
    combine = args[0] if args else kwargs.get("combine_fn")
    given = args[1] if len(args) > 1 else kwargs.get("input_tensor", kwargs.get("xs"))
    several = isinstance(given, tuple | list)
    xs = tuple(given) if several else (given,)
    if combine is None or not xs or not all(isinstance(x, Value) for x in xs):
        raise UserError("HPL103", f"hl.{what}(combine_fn, input_tensor, dim, ...) takes a tensor or a tuple of "
                                  "tensors", rng)
    if any(x.shape != xs[0].shape for x in xs):
        raise UserError("HPL105", f"hl.{what}: the tensors of a tuple must have one shape, got "
                                  + ", ".join(str(list(x.shape)) for x in xs), rng)
    return combine, xs, several


def _dim_and_reverse(what: str, args: list, kwargs: dict, at: int, rng: Range) -> tuple[int, bool]:
    """A scan's constant `dim` and `reverse`, positional from `at` or by keyword."""
    dim = unwrap(args[at] if len(args) > at else kwargs.get("dim"))
    reverse = unwrap(args[at + 1] if len(args) > at + 1 else kwargs.get("reverse", False))
    if dim is None or isinstance(dim, Value):
        raise UserError("HPL103", f"hl.{what} needs a constant dim", rng)
    if not isinstance(reverse, bool):
        raise UserError("HPL106", f"hl.{what}: reverse must be a constant True or False", rng)
    return as_int(dim, "dim", rng), reverse


def _dim(what: str, dim: Any, x: Value, rng: Range) -> int:
    """`dim` of `x`, checked and made non-negative."""
    ndim = len(x.shape)
    dim = as_int(dim, "dim", rng)
    if not -ndim <= dim < max(ndim, 1):
        raise UserError("HPL105", f"hl.{what}: dim {dim} is out of range for {ndim} dims", rng)
    return dim % max(ndim, 1)


def _scan(d: Dispatcher, combine: Any, xs: tuple[Value, ...], dim: int, reverse: bool, several: bool,
          rng: Range) -> tuple[tuple[Value, ...], Value]:
    """The scanned values and the validity flags after the scan (1 where some valid position was combined in)."""
    ops = d.ops
    n = xs[0].shape[dim]
    valid = ops.make("scan_valid", (ops.full(xs[0].shape, 1, torch.int32, rng, like=xs[0]),), {"dim": dim},
                     lambda t, dim: t, rng)
    positions = ops.index(ops.arange(n, torch.int32, None, rng),
                          tuple(slice(None) if i == dim else None for i in range(len(xs[0].shape))), rng)
    shift = 1
    while shift < n:
        amount = n - shift if reverse else shift  # pltpu.roll: element i moves to i + amount (mod n)
        other = tuple(ops.roll(x, amount, dim, rng) for x in xs)
        other_valid = ops.roll(valid, amount, dim, rng)
        inside = ops.binary("lt", positions, n - shift, rng) if reverse else ops.binary("ge", positions, shift, rng)
        takes = ops.binary("logical_and", inside, ops.binary("ne", other_valid, 0, rng), rng)
        both = ops.binary("logical_and", takes, ops.binary("ne", valid, 0, rng), rng)
        combined = _call(d, combine, other, xs, several, rng)  # the partner on the left: earlier (later in reverse)
        xs = tuple(ops.where(both, c, ops.where(takes, o, x, rng), rng)
                   for c, o, x in zip(combined, other, xs, strict=True))
        valid = ops.where(takes, 1, valid, rng)
        shift *= 2
    return xs, valid


def _call(d: Dispatcher, combine: Any, left: tuple[Value, ...], right: tuple[Value, ...], several: bool,
          rng: Range) -> tuple[Value, ...]:
    """`combine` on one step's pairs, in the calling convention its parameters ask for; results cast to the
    inputs' dtypes (a scan keeps them)."""
    fn = combine.fn if isinstance(combine, Closure) else combine
    if several:
        params = len(fn.args.args) if isinstance(fn, ast.FunctionDef) else 2
        call_args = [*left, *right] if params >= 4 else [left, right]
    else:
        call_args = [left[0], right[0]]
    if isinstance(combine, Closure) and combine.foreign:
        raise UserError("HPL101", "hl.associative_scan: the combine function must be defined in this file", rng)
    if isinstance(fn, ast.FunctionDef):
        out = d.t.inline(fn, call_args, {}, rng, combine.env if isinstance(combine, Closure) else None)
    else:
        out = d.call(combine, call_args, {}, rng)
    outs = tuple(out) if isinstance(out, tuple | list) else (out,)
    if len(outs) != len(left) or not all(isinstance(o, Value) for o in outs):
        raise UserError("HPL105", f"hl.associative_scan: the combine function must return {len(left)} tensor"
                                  f"{'s' if len(left) > 1 else ''}, one per input", rng)
    return tuple(o if o.dtype == x.dtype and o.shape == x.shape else _like(d, o, x, rng)
                 for o, x in zip(outs, left, strict=True))


def _like(d: Dispatcher, o: Value, x: Value, rng: Range) -> Value:
    if o.shape != x.shape:
        raise UserError("HPL105", f"hl.associative_scan: the combine function returned shape {list(o.shape)} for "
                                  f"inputs of shape {list(x.shape)}; it must work elementwise", rng)
    return d.ops.cast(o, x.dtype, rng)
