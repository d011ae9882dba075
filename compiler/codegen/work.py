"""Static work and live-memory estimates of device code, read by the VMEM report and the performance model."""

from __future__ import annotations

import math

import torch

from ..frontend.ops import TRANSCENDENTAL
from ..ir import InnerLoop, Load, Node, Op, Store, Value
from ..plan import Work

_NO_VECTOR_WORK = {"reshape", "index", "full", "iota", "tile_begin", "tile_end", "tile_id", "broadcast_to", "alloc"}


def sublane_rows(dtype: torch.dtype) -> int:
    """Rows per (sublanes x 128) vector tile: 8 for 32-bit, 16 for 16-bit, 32 for 8-bit."""
    return 8 * max(1, 4 // max(1, dtype.itemsize))


def padded_elems(shape: tuple[int, ...], dtype: torch.dtype) -> int:
    """Elements of `shape` once laid out in (sublane, 128-lane) tiles, as the TPU stores it."""
    if not shape:
        return sublane_rows(dtype) * 128
    dims = list(shape)
    dims[-1] = -(-dims[-1] // 128) * 128
    if len(dims) >= 2:
        rows = sublane_rows(dtype)
        dims[-2] = -(-dims[-2] // rows) * rows
    else:
        dims = [sublane_rows(dtype)] + dims
    return math.prod(dims)


def padded_bytes(shape: tuple[int | None, ...], dtype: torch.dtype) -> int:
    dims = tuple(d for d in shape if d is not None)
    return padded_elems(dims, dtype) * dtype.itemsize


def _vreg_elems(v: Value) -> float:
    """Vector work in 32-bit-lane units: a packed bf16 vreg holds twice the elements of an f32 one."""
    return padded_elems(tuple(v.shape), v.dtype) * min(1.0, v.dtype.itemsize / 4)


def op_work(op: Op) -> Work:
    outs = op.outputs()
    if op.kind in _NO_VECTOR_WORK:
        return Work()
    if op.kind == "dot":
        a, b = op.args[0], op.args[1]
        *batch, m, k = a.shape
        n = b.shape[-1]
        bsz = math.prod(batch) if batch else 1
        flops = 2.0 * bsz * m * n * k
        rows = sublane_rows(a.dtype)
        pm, pn, pk = -(-m // rows) * rows, -(-n // 128) * 128, -(-k // 128) * 128
        acc_work = _vreg_elems(outs[0]) if len(op.args) > 2 else 0.0
        return Work(flops, 2.0 * bsz * pm * pn * pk, acc_work, 0.0)
    ins = [a for a in op.args if isinstance(a, Value)]
    size = max([_vreg_elems(v) for v in ins + list(outs)] or [0.0])
    if op.kind in ("softmax", "log_softmax"):
        return Work(0, 0, 4 * size, size)
    if op.kind in TRANSCENDENTAL:
        return Work(0, 0, size, size)
    return Work(0, 0, size, 0)


def region_work(nodes: list[Node]) -> Work:
    """Work of straight-line code, not descending into inner loops (they are counted per iteration)."""
    total = Work()
    for n in nodes:
        if isinstance(n, Op):
            total = total + op_work(n)
        elif isinstance(n, Load | Store):
            v = n.out if isinstance(n, Load) else n.value
            total = total + Work(0, 0, _vreg_elems(v) * 0.5, 0)
    return total


def live_peak_bytes(nodes: list[Node]) -> int:
    """Peak bytes of simultaneously live device values (compiler temporaries), nested loops included."""
    order: list[Node] = []
    _linearize(nodes, order)
    last_use: dict[int, int] = {}
    for i, n in enumerate(order):
        for v in _uses(n):
            last_use[v.id] = i
    live: dict[int, int] = {}
    peak = 0
    for i, n in enumerate(order):
        for v in _defs(n):
            live[v.id] = padded_bytes(tuple(v.shape), v.dtype)
        peak = max(peak, sum(live.values()))
        for v in _uses(n):
            if last_use.get(v.id) == i:
                live.pop(v.id, None)
        for v in _defs(n):
            if v.id not in last_use:
                live.pop(v.id, None)
    return peak


def _linearize(nodes: list[Node], out: list[Node]) -> None:
    for n in nodes:
        out.append(n)
        if isinstance(n, InnerLoop):
            _linearize(n.body, out)
            out.append(_LoopEnd(n))


class _LoopEnd:
    def __init__(self, loop: InnerLoop):
        self.loop = loop


def _defs(n: object) -> list[Value]:
    if isinstance(n, Op):
        return list(n.outputs())
    if isinstance(n, Load):
        return [n.out]
    if isinstance(n, InnerLoop):
        return [c.phi for c in n.carried]
    if isinstance(n, _LoopEnd):
        return [c.result for c in n.loop.carried if c.result is not None]
    return []


def _uses(n: object) -> list[Value]:
    if isinstance(n, Op):
        return [a for a in _flatten(n.args) if isinstance(a, Value)]
    if isinstance(n, Store):
        return [n.value]
    if isinstance(n, InnerLoop):
        return [c.init for c in n.carried]
    if isinstance(n, _LoopEnd):
        return [c.next for c in n.loop.carried if c.next is not None] + [c.phi for c in n.loop.carried]
    return []


def _flatten(items):
    for a in items:
        if isinstance(a, tuple | list):
            yield from _flatten(a)
        else:
            yield a
