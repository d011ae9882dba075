"""Partial tiles: which dims of each device value may hold padding, and the `mask` ops that keep it out.

A tile is partial when its blocks do not exactly cover its range (`TileDim.partial`): the last block runs
past the end. A load of that block reads padding (whatever Pallas' padded edge block or a padded resident
block holds: garbage, NaN in interpret mode) and Pallas drops the padded part of a store, so elementwise
code needs nothing. Only ops that combine positions along a dim can see the padding, so before each of them
this pass inserts a `mask` op — `where(begin + iota < end, x, fill)` — with the op's identity as the fill:
- reductions over the dim: sum/mean/any -> 0, amax/argmax/logsumexp -> -inf, amin/argmin -> +inf, prod/all
  -> 1 (mean then divides by the valid count, not the block);
- softmax / log_softmax along the dim: -inf; cumsum / cumprod along it: 0 / 1 (a device-bounded window starts
  before its step's first position, and a reverse scan runs from the padded tail, so padding can precede valid
  positions); hl.associative_scan has no identity: its validity flags (`scan_valid`) are 0 there (scans.py);
- dots contracting the dim: both operands 0 (0 * NaN would still be NaN);
- a value carried by an inner loop and updated elementwise over the loop's own partial tile: its padding
  keeps the carried value (`where(valid, next, phi)`), and iterations that lie wholly past the end (sub-tiles
  of a partial launch-grid tile) keep every carried value.
Masks cost only where a tile really is partial: dividing blocks get no mask at all.

How a value knows: `tags[value id]` is, per dim, the set of partial tiles whose positions that dim spans,
computed by forward propagation (to a fixpoint through loop-carried values). Ops not known here that take a
tagged value make all their dims OPAQUE (positions may have moved): reducing or storing such a dim is an
HPL210 diagnostic naming the tile, never a silent wrong answer. A new op that keeps positions elementwise
belongs in `ELEMENTWISE`; one that mixes positions along a dim needs a rule in `_Rewriter.op`.

Dynamic tile ends (jagged rows, bounds read on the device) reuse all of this unchanged: a `TileDim` whose end
is a device value reports `partial` (always masked), and `ExprWriter.tile_limit` spells its end. An
`hl.jagged_tile` also ends per lane of its enclosing tiles (compiler/frontend/jagged.py): the analysis then
tracks those lane tiles as well, so each mask over the jagged dim knows which axes of the value its lanes run
along (`lanes`); a value that lost them cannot be masked, and that is an HPL106 diagnostic.
"""

from __future__ import annotations

import math

import torch

from ..ir.tile_ir import Carried, GridLoop, InnerLoop, KernelIR, Load, Node, Op, Store, TileDim, Value
from ..support.diagnostics import UserError
from .ops import ELEMENTWISE

OPAQUE = "opaque"  # a dim whose positions no longer line up with any tile
EMPTY: frozenset = frozenset()
Tags = tuple[frozenset, ...]

REDUCTIONS = {"sum", "mean", "amax", "amin", "prod", "argmax", "argmin", "logsumexp", "any", "all"}
_LOW = {"amax", "argmax", "logsumexp"}  # reductions whose identity is the lowest value
_HIGH = {"amin", "argmin"}
PAST_END = 2**31 - 1  # a scatter position no tensor has: the padded rows of a partial tile write nothing


def insert_masks(ir: KernelIR) -> None:
    """Tag every device value with the partial tiles it spans, then insert masks where padding would leak."""
    grids = [n for n in ir.host if isinstance(n, GridLoop)]
    if not any(_has_partial(g) for g in grids):
        return
    lanes = frozenset(p for lp in ir.inner_loops for d in lp.dims for p in d.lane_dims)
    analysis = _Analysis(lanes)
    for g in grids:
        analysis.region(g.body)
    rewriter = _Rewriter(analysis.tags)
    for g in grids:
        rewriter.region(g.body, None)


def _has_partial(grid: GridLoop) -> bool:
    if any(d.partial for d in grid.dims):
        return True
    stack: list[Node] = list(grid.body)
    while stack:
        n = stack.pop()
        if isinstance(n, InnerLoop):
            if any(d.partial for d in n.dims):
                return True
            stack.extend(n.body)
    return False


def fill_value(kind: str, dtype: torch.dtype) -> float | int | bool:
    """The identity of a reduction (what padding must read as so it changes nothing)."""
    if kind in ("all", "prod"):
        return True if dtype == torch.bool else 1
    if kind in _LOW or kind in _HIGH:
        low = kind in _LOW
        if dtype == torch.bool:
            return not low
        if dtype.is_floating_point:
            return -math.inf if low else math.inf
        info = torch.iinfo(dtype)
        return info.min if low else info.max
    return False if dtype == torch.bool else 0


# -- analysis ----------------------------------------------------------------------------------------------

def _values(args) -> list[Value]:
    out = []
    for a in args:
        if isinstance(a, Value):
            out.append(a)
        elif isinstance(a, tuple | list):
            out.extend(_values(a))
    return out


class _Analysis:
    """Forward propagation of per-dim tile tags; only values with some tag are stored."""

    def __init__(self, lanes: frozenset = EMPTY):
        self.tags: dict[int, Tags] = {}
        self.lanes = lanes  # the enclosing tiles of jagged loops: tracked too, so a mask finds each lane's axis

    def of(self, v: Value) -> Tags:
        return self.tags.get(v.id) or (EMPTY,) * len(v.shape)

    def set(self, v: Value, tags: Tags) -> None:
        if any(tags):
            self.tags[v.id] = tags
        else:
            self.tags.pop(v.id, None)

    def region(self, nodes: list[Node]) -> None:
        for n in nodes:
            if isinstance(n, Load):
                self.set(n.out, load_tags(n, self.lanes, self.of))
            elif isinstance(n, Op):
                outs = n.outputs()
                for v, tags in zip(outs, self.op(n), strict=True):
                    self.set(v, tags)
            elif isinstance(n, InnerLoop):
                self.loop(n)

    def loop(self, loop: InnerLoop) -> None:
        own = {d for d in loop.dims if d.partial}
        for c in loop.carried:
            self.set(c.phi, self.of(c.init))
        for _ in range(64):  # tags only grow, so this settles after a few passes
            self.region(loop.body)
            changed = False
            for c in loop.carried:
                nxt = tuple(t - own for t in self.of(c.next)) if c.next is not None else self.of(c.phi)
                merged = tuple(a | b for a, b in zip(self.of(c.phi), nxt, strict=True))
                if merged != self.of(c.phi):
                    self.set(c.phi, merged)
                    changed = True
            if not changed:
                break
        for c in loop.carried:
            self.set(c.result, self.of(c.phi))

    def op(self, op: Op) -> list[Tags]:
        k, a, kw = op.kind, op.args, op.kwargs
        outs = op.outputs()
        out = outs[0]
        n = len(out.shape)
        if k in ELEMENTWISE:
            return [self.broadcast(_values(a), out.shape)]
        if k == "full":
            like = kw.get("like")
            if isinstance(like, Value):
                return [self.of(like)]
            tiles = kw.get("tiles") or ()
            return [tuple(frozenset({d}) if isinstance(d, TileDim) and tracked(d, self.lanes) else EMPTY
                          for d in tiles) or (EMPTY,) * n]
        if k == "iota":
            if a and isinstance(a[0], tuple) and tracked(a[0][1], self.lanes):
                return [(frozenset({a[0][1]}),)]
            return [(EMPTY,) * n]
        if k in REDUCTIONS:
            x = self.of(a[0])
            dims = reduced_dims(kw.get("dim"), len(x))
            if kw.get("keepdim"):
                tags = tuple(EMPTY if i in dims else t for i, t in enumerate(x))
            else:
                tags = tuple(t for i, t in enumerate(x) if i not in dims)
            return [tags] * len(outs)
        if k in ("softmax", "log_softmax", "cumsum", "cumprod", "roll", "scan_valid"):
            return [self.of(a[0])]
        if k == "dot":
            ta, tb = self.of(a[0]), self.of(a[1])
            batch = tuple(x | y for x, y in zip(ta[:-2], tb[:-2], strict=True))
            tags = batch + (ta[-2], tb[-1])
            if len(a) > 2 and isinstance(a[2], Value):
                tags = tuple(x | y for x, y in zip(tags, self.broadcast([a[2]], out.shape), strict=True))
            return [tags]
        if k == "permute":
            x = self.of(a[0])
            return [tuple(x[d] for d in kw["dims"])]
        if k == "broadcast_to":
            return [self.broadcast([a[0]], out.shape)]
        if k == "reshape":
            return [reshape_tags(self.of(a[0]), tuple(a[0].shape), tuple(out.shape))]
        if k == "index":
            return [index_tags(self.of(a[0]), kw["items"])]
        if k == "mask":
            return [self.of(a[0])]
        if any(maskable(t) for v in _values(a) for t in self.of(v)):
            return [(frozenset({OPAQUE}),) * len(v.shape) for v in outs]
        return [(EMPTY,) * len(v.shape) for v in outs]  # lane tiles alone are forgotten (a jagged mask then says so)

    def broadcast(self, args: list[Value], shape: tuple[int, ...]) -> Tags:
        n = len(shape)
        tags = [EMPTY] * n
        for v in args:
            t = self.of(v)
            off = n - len(t)
            for i, s in enumerate(t):
                if s and v.shape[i] == shape[off + i]:
                    tags[off + i] = tags[off + i] | s
        return tuple(tags)


def tracked(d: TileDim, lanes: frozenset) -> bool:
    """Does the analysis follow tile `d`? Partial tiles (to mask them) and the lane tiles of jagged loops."""
    return d.partial or d in lanes


def maskable(tags: frozenset) -> bool:
    """Does a dim hold padding to mask (a partial tile, or positions moved beyond knowing)?"""
    return any(d == OPAQUE or d.partial for d in tags)


def load_tags(n: Load, lanes: frozenset = EMPTY, of=None) -> Tags:
    """A loaded block: one dim per tile / `:` / None item; tile dims carry their tile when it is partial
    (or a jagged loop's lane tile).

    An index kind not known here that adds dims makes every dim OPAQUE when some tile in the index is
    partial (loud, never silent): such a kind belongs in this function.
    """
    tags = []
    for it in n.index:
        if it[0] == "tile":
            tags.append(frozenset({it[1]}) if tracked(it[1], lanes) else EMPTY)
        elif it[0] in ("full", "newaxis", "window"):  # a window's positions all lie inside the array
            tags.append(EMPTY)
        elif it[0] == "gather":  # the gathered dims are the positions' dims, with their padding
            tags.extend(of(it[1]) if of is not None else [EMPTY] * len(it[1].shape))
    if len(tags) != len(n.out.shape):
        partial = any(isinstance(x, TileDim) and x.partial for it in n.index for x in it[1:])
        return (frozenset({OPAQUE}) if partial else EMPTY,) * len(n.out.shape)
    return tuple(tags)


def reduced_dims(dim, ndim: int) -> set[int]:
    if dim is None:
        return set(range(ndim))
    dims = dim if isinstance(dim, tuple | list) else (dim,)
    return {d % max(1, ndim) for d in dims}


def reshape_tags(tags: Tags, src: tuple[int, ...], dst: tuple[int, ...]) -> Tags:
    """Dims that survive a reshape keep their tags; merged or split groups holding a tag become OPAQUE."""
    if not any(tags):
        return (EMPTY,) * len(dst)
    if 0 in src or 0 in dst:
        return (EMPTY,) * len(dst)
    out: list[frozenset] = []
    i = j = 0
    while i < len(src) or j < len(dst):
        if i < len(src) and src[i] == 1 and (j >= len(dst) or dst[j] != 1):
            i += 1
            continue
        if j < len(dst) and dst[j] == 1 and (i >= len(src) or src[i] != 1):
            out.append(EMPTY)
            j += 1
            continue
        if src[i] == dst[j]:
            out.append(tags[i])
            i += 1
            j += 1
            continue
        group, pi, pj, width = {i}, src[i], dst[j], 1
        i += 1
        j += 1
        while pi != pj:
            if pi < pj:
                pi *= src[i]
                group.add(i)
                i += 1
            else:
                pj *= dst[j]
                width += 1
                j += 1
        merged = frozenset().union(*(tags[g] for g in group))
        out.extend([frozenset({OPAQUE}) if maskable(merged) else EMPTY] * width)
    return tuple(out)


def index_tags(tags: Tags, items: tuple) -> Tags:
    """Value indexing with None / : / ... / ints."""
    real = [it for it in items if it is not None and it is not Ellipsis]
    out: list[frozenset] = []
    i = 0
    for it in items:
        if it is Ellipsis:
            for _ in range(len(tags) - len(real)):
                out.append(tags[i])
                i += 1
        elif it is None:
            out.append(EMPTY)
        elif isinstance(it, slice):  # a slice that does not start at 0 moves the positions
            moved = it.start not in (None, 0) or it.step not in (None, 1)
            out.append((frozenset({OPAQUE}) if maskable(tags[i]) else EMPTY) if moved else tags[i])
            i += 1
        else:
            i += 1
    out.extend(tags[i:])
    return tuple(out)


# -- rewrite -----------------------------------------------------------------------------------------------

def _tile_names(tags: frozenset) -> str:
    return ", ".join(sorted(f"`{d.name}`" for d in tags if isinstance(d, TileDim) and d.partial))


def _describe(d: TileDim) -> str:
    if d.dynamic:
        return f"`{d.name}` (block {d.block_size} over a range computed on the device)"
    return f"`{d.name}` (block {d.block_size} over {d.extent - d.begin})"


class _Rewriter:
    """Inserts `mask` ops before the consumers the analysis says can see padding."""

    def __init__(self, tags: dict[int, Tags]):
        self.tags = tags

    def of(self, v: Value) -> Tags:
        return self.tags.get(v.id) or (EMPTY,) * len(v.shape)

    def region(self, nodes: list[Node], loop: InnerLoop | None) -> None:
        out: list[Node] = []
        for n in nodes:
            if isinstance(n, InnerLoop):
                self.region(n.body, n)
                out.append(n)
            elif isinstance(n, Op):
                out.extend(self.op(n))
                out.append(n)
            else:
                if isinstance(n, Store):
                    out.extend(self.check_store(n))
                out.append(n)
        if loop is not None:
            for c in loop.carried:
                out.extend(self.carry(loop, c))
        nodes[:] = out

    def mask(self, x: Value, axes: list, fill, rng, live=(), lanes_needed: bool = True) -> tuple[Op, Value]:
        """`where(valid, x, fill)`: valid = every (axis, tile) position in range and every `live` tile non-empty;
        a jagged tile's positions also lie below their lane's end (`lanes`: the axes of `x` its lanes run on;
        None where `x` does not run along them and `lanes_needed` is False: the other operand of a dot)."""
        out = Value(x.meta, "device")
        lanes = tuple(self.lane_axes(x, d, rng, lanes_needed) if isinstance(d, TileDim) and d.jagged else None
                      for _, d in axes)
        m = Op(rng, "mask", (x, fill), {"dims": tuple(axes), "live": tuple(live), "lanes": lanes}, out)
        out.producer = m
        return m, out

    def lane_axes(self, x: Value, d: TileDim, rng, needed: bool = True) -> tuple[int, ...] | None:
        """The axis of `x` along each of jagged tile `d`'s lane tiles, in the order of its per-lane ends."""
        tags = self.of(x)
        found = []
        for lane in d.lane_dims:
            axis = next((i for i, t in enumerate(tags) if lane in t), None)
            if axis is None and not needed:
                return None
            if axis is None:
                raise UserError("HPL106", f"this value runs along jagged tile `{d.name}` but not along `{lane.name}`, "
                                          f"whose lanes give its ends, so its valid positions are not known here; "
                                          f"keep `{lane.name}` in the value (index as `x[{lane.name}, {d.name}]`)",
                                rng)
            found.append(axis)
        if found != sorted(found):
            raise UserError("HPL106", f"this value runs along the lane tiles of jagged tile `{d.name}` in another "
                                      "order than its per-lane ends; transpose the ends to match", rng)
        return tuple(found)

    def partial_axes(self, v: Value, axes) -> list[tuple[int, TileDim]]:
        tags = self.of(v)
        found = []
        for ax in sorted(axes):
            for d in sorted(tags[ax], key=_order):
                if d == OPAQUE or d.partial:
                    found.append((ax, d))
        return found

    def op(self, op: Op) -> list[Node]:
        k, a = op.kind, op.args
        if k in REDUCTIONS and isinstance(a[0], Value):
            x = a[0]
            axes = self.partial_axes(x, reduced_dims(op.kwargs.get("dim"), len(x.shape)))
            if not axes:
                return []
            self._no_opaque(axes, op)
            if k == "mean" and any(d.jagged for _, d in axes):
                raise UserError("HPL106", "a mean over a jagged tile would divide by the block, not each lane's "
                                          "length; sum it and divide by the lengths", op.range)
            m, out = self.mask(x, axes, fill_value(k, x.dtype), op.range)
            op.args = (out,) + tuple(a[1:])
            if k == "mean":
                op.kwargs["valid"] = tuple(sorted({d for _, d in axes}, key=_order))
            return [m]
        if k == "scan_valid":  # hl.associative_scan's validity flags: 0 where the scanned dim holds padding
            axes = self.partial_axes(a[0], {op.kwargs["dim"]})
            if not axes:
                return []
            self._no_opaque(axes, op)
            m, out = self.mask(a[0], axes, 0, op.range)
            op.args = (out,)
            return [m]
        if k in ("softmax", "log_softmax", "cumsum", "cumprod"):
            x = a[0]
            axes = self.partial_axes(x, {op.kwargs["dim"]})
            if not axes:
                return []
            self._no_opaque(axes, op)
            # a scan's padding follows the valid positions at a partial tail, but a device-bounded window starts
            # before its step's first position, and a reverse scan (hl.cumsum(reverse=True)) runs from the tail:
            # padding is the scan's identity
            fill = -math.inf if k in ("softmax", "log_softmax") else 0 if k == "cumsum" else 1
            m, out = self.mask(x, axes, fill, op.range)
            op.args = (out,) + tuple(a[1:])
            return [m]
        if k == "dot":
            x, y = a[0], a[1]
            kx, ky = len(x.shape) - 1, len(y.shape) - 2
            dims = self.of(x)[kx] | self.of(y)[ky]
            if not dims:
                return []
            axes_x = [(kx, d) for d in sorted(dims, key=_order)]
            self._no_opaque(axes_x, op)
            # a jagged contraction needs its lanes on one operand: the other holds real data below the longest lane
            mx, vx = self.mask(x, axes_x, 0, op.range, lanes_needed=False)
            my, vy = self.mask(y, [(ky, d) for _, d in axes_x], 0, op.range, lanes_needed=False)
            for i, (_, d) in enumerate(axes_x):
                if isinstance(d, TileDim) and d.jagged and mx.kwargs["lanes"][i] is None \
                        and my.kwargs["lanes"][i] is None:
                    self.lane_axes(x, d, op.range)  # raises: neither operand knows each lane's end
            op.args = (vx, vy) + tuple(a[2:])
            return [mx, my]
        return []

    def _no_opaque(self, axes: list[tuple[int, object]], op: Op) -> None:
        if any(d == OPAQUE for _, d in axes):
            raise UserError(
                "HPL210", f"`{op.kind}` combines positions of a value whose padded tail (from a partial tile) was "
                          "moved by an earlier reshape or operation, so it cannot be masked; pick block sizes that "
                          "divide the loop extents", op.range)

    def check_store(self, n: Store) -> list[Node]:
        """A store writes only valid positions: a tile-indexed dim drops its padding itself (Pallas drops the
        padded part of an edge block; device-bounded windows are masked by the store); a scatter whose positions
        come from the partial tile's own positions gets them masked to a position past the end, which it skips,
        where the stored value spans that tile too (a jagged tile's lanes included); the other partial tiles its
        positions follow are named in `n.padding`, whose positions write nothing (one-hot: out of the selection;
        DMA: no copy). Anything else would land padding on valid elements: HPL210."""
        skip = []
        for it in n.index:
            if it[0] == "gather":
                for axis, t in enumerate(self.of(it[1])):
                    if OPAQUE in t:
                        raise UserError("HPL210", "this scatter's positions hold padding of a partial tile moved by an "
                                                  "earlier reshape or operation; pick block sizes that divide the loop "
                                                  "extents", n.range)
                    skip += [(axis, d) for d in sorted(t, key=_order) if d.partial]
        n.padding = tuple(dict.fromkeys(skip))
        tags = self.of(n.value)
        if not any(maskable(t) for t in tags):
            return []
        block = []
        for it in n.index:
            if it[0] in ("tile", "full", "window"):
                block.append((it, 0))
            elif it[0] == "gather":
                block.extend((it, j) for j in range(len(it[1].shape)))
        off = len(block) - len(tags)
        drop: dict[int, list[tuple[int, TileDim]]] = {}  # gather item position -> (index axis, tile) to mask
        for i, t in enumerate(tags):
            for d in t:
                if d != OPAQUE and not d.partial:
                    continue
                item, axis = block[off + i] if off + i >= 0 else (None, 0)
                if d == OPAQUE:
                    raise UserError("HPL210", f"this store would write padding of a partial tile ({_tile_names(t) or 'moved by a reshape'}) "
                                              "into valid positions; pick block sizes that divide the loop extents", n.range)
                if item is not None and item[0] == "gather" and d in self.of(item[1])[axis]:
                    drop.setdefault(n.index.index(item), []).append((axis, d))
                elif item is None or item[0] != "tile" or item[1] != d:
                    raise UserError("HPL210", f"the stored value spans partial tile {_describe(d)} in a dim that this "
                                              "store indexes differently, so its padding would land on valid "
                                              "elements; index the store with the same tile", n.range)
        masks: list[Node] = []
        index = list(n.index)
        for pos, axes in drop.items():
            item = index[pos]
            m, idx = self.mask(item[1], sorted(set(axes), key=lambda a: (a[0], _order(a[1]))), PAST_END, n.range)
            self.tags[idx.id] = self.of(item[1])
            masks.append(m)
            index[pos] = (item[0], idx, *item[2:])
        n.index = tuple(index)
        masked = {a for axes in drop.values() for a in axes}
        n.padding = tuple(p for p in n.padding if p not in masked)
        return masks

    def carry(self, loop: InnerLoop, c: Carried) -> list[Node]:
        """Keep the carried value where this iteration's block is padding (or wholly past the end)."""
        if c.next is None:
            return []
        own = [d for d in loop.dims if d.partial]
        tags = self.of(c.next)
        axes = [(i, d) for i, t in enumerate(tags) for d in sorted(t, key=_order) if d in own]
        live = [d for d in loop.dims if d.may_be_empty]
        if not axes and not live:
            return []
        m, out = self.mask(c.next, axes, c.phi, loop.range, live)
        out.hint = c.next.hint
        c.next = out
        return [m]


def _order(d) -> tuple:
    return (0, d.loop_id, d.axis) if isinstance(d, TileDim) else (1, 0, 0)
