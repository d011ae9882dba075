"""`hl.split` / `hl.join`: a last dim of size 2 taken apart and put back, lowered so TPUs never hold a
2-wide minor dim.

Kernels (rope) view the last dim `d` of a block as `d/2` pairs: `x.reshape([..., 2, d/2]).permute(..., -1, -2)`
then `hl.split` it into the two halves, compute, and `hl.join(a, b).permute(..., -1, -2).reshape([..., d])`.
Taken literally that is a (…, d/2, 2) array, whose minor dim of 2 a TPU pads to 128 lanes and relayouts. Here
`split` of such a view reads the halves straight from the un-reshaped block (`x[..., :d/2]`, `x[..., d/2:]`) and
the reshape closing a `join` becomes `concatenate([a, b], -1)`; the view ops they replace are left unused and
dropped (`drop_unused_views`). Any other split/join is the literal `x[..., 0]` / `stack([a, b], -1)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir.tile_ir import GridLoop, InnerLoop, Load, Node, Op, Return, Store, Value, bound_values, flat
from ..support.diagnostics import Range, UserError

if TYPE_CHECKING:
    from .ops import OpBuilder


def _swaps_last_two(op: Op) -> bool:
    dims = op.kwargs.get("dims", ())
    n = len(dims)
    return n >= 2 and tuple(dims) == (*range(n - 2), n - 1, n - 2)


def _pair_source(v: Value) -> tuple[Value, int] | None:
    """`src` and `h` when v = src.reshape([..., 2, h]).permute(..., -1, -2), else None."""
    perm = v.producer
    if not (isinstance(perm, Op) and perm.kind == "permute" and _swaps_last_two(perm)):
        return None
    inner = perm.args[0]
    resh = inner.producer if isinstance(inner, Value) else None
    if not (isinstance(resh, Op) and resh.kind == "reshape" and isinstance(resh.args[0], Value)):
        return None
    src = resh.args[0]
    h = inner.shape[-1]
    if inner.shape[-2] != 2 or src.shape != (*inner.shape[:-2], 2 * h):
        return None
    return src, h


def split(ops: OpBuilder, v: object, rng: Range) -> tuple[Value, Value]:
    if not isinstance(v, Value) or not v.shape or v.shape[-1] != 2:
        raise UserError("HPL105", "hl.split takes a tensor whose last dim has size 2", rng)
    pair = _pair_source(v)
    if pair is not None:
        src, h = pair
        return (ops.index(src, (Ellipsis, slice(0, h)), rng), ops.index(src, (Ellipsis, slice(h, 2 * h)), rng))
    return ops.index(v, (Ellipsis, 0), rng), ops.index(v, (Ellipsis, 1), rng)


def join(ops: OpBuilder, a: object, b: object, rng: Range) -> Value:
    if not (isinstance(a, Value) and isinstance(b, Value)) or a.shape != b.shape or a.dtype != b.dtype:
        raise UserError("HPL105", "hl.join takes two tensors of the same shape and dtype", rng)
    return ops.cat("stack", (a, b), -1, rng)


def joined_halves(x: Value, shape: tuple[int, ...]) -> tuple[Value, Value] | None:
    """(a, b) when reshaping x to `shape` is hl.join(a, b).permute(..., -1, -2).reshape([..., 2 * h])."""
    perm = x.producer
    if not (isinstance(perm, Op) and perm.kind == "permute" and _swaps_last_two(perm)):
        return None
    inner = perm.args[0]
    stack = inner.producer if isinstance(inner, Value) else None
    if not (isinstance(stack, Op) and stack.kind == "stack" and stack.kwargs.get("dim") == len(inner.shape) - 1):
        return None
    a, b = stack.args[0] if len(stack.args[0]) == 2 else (None, None)
    merged = (*x.shape[:-2], 2 * x.shape[-1])
    want = tuple(shape)
    if a is None or len(want) != len(merged) or any(w not in (m, -1) for w, m in zip(want, merged, strict=True)):
        return None
    return a, b


_VIEWS = frozenset({"reshape", "permute", "index", "stack", "cat", "to"})


def drop_unused_views(host: list[Node]) -> None:
    """Remove device view ops (and casts) whose result nothing reads, repeatedly: what split/join replaced."""
    while True:
        used: set[int] = set()
        regions: list[list[Node]] = []
        _uses(host, used, regions)
        dropped = False
        for region in regions:
            keep = [n for n in region if not (isinstance(n, Op) and n.kind in _VIEWS and all(
                o.space == "device" and o.id not in used for o in n.outputs()))]
            dropped |= len(keep) != len(region)
            region[:] = keep
        if not dropped:
            return


def _uses(nodes: list[Node], used: set[int], regions: list[list[Node]]) -> None:
    regions.append(nodes)
    for n in nodes:
        if isinstance(n, Op):
            used.update(a.id for a in flat((n.args, tuple(n.kwargs.values()))) if isinstance(a, Value))
        elif isinstance(n, Load | Store):
            used.update(a.id for it in n.index for a in flat(it) if isinstance(a, Value))
            if isinstance(n, Store):
                used.update(v.id for v in (n.value, n.pred) if v is not None)
        elif isinstance(n, Return):
            used.update(v.id for v in n.values if isinstance(v, Value))
        if isinstance(n, InnerLoop):
            used.update(v.id for v in bound_values(n))
            for c in n.carried:
                used.update(v.id for v in (c.init, c.next) if v is not None)
        if isinstance(n, GridLoop | InnerLoop):
            _uses(n.body, used, regions)

