"""`hl.jagged_tile(lanes)` in the eager reference: a tile loop whose length differs per lane of enclosing tiles.

Helion's meaning: the loop runs to `lanes.amax()`, and position k of lane i (the lanes' axes are enclosing
tiles) is valid only below `lanes[i]`; an invalid position reads 0, is never stored, and is left out of a
reduction over the loop's axis (the reduction's identity takes its place) and of a product contracting it.

Eager values are plain tensors, so which axis of a value runs along which tile is tracked beside them:
`Axes` labels each tensor's axes with the Tile (this iteration's) they run along, from the tiles that made it
(`x[tile_b, tile_m]`, `tile.index`, `hl.zeros([tile_b, tile_m])`, hl.load's index items) and through torch
ops (broadcasting, views, reductions, matmuls), as a torch-function mode. A load, store, reduction or product
that meets a jagged axis is masked from the labels; one whose labels are lost (an op this module does not
follow) raises rather than compute without the mask. Only kernels that call `hl.jagged_tile` pay for this.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from compiler.reference.tiles import Tile

Labels = tuple[Tile | None, ...]

_IDENTITY = {"sum": 0.0, "nansum": 0.0, "prod": 1.0, "amax": -float("inf"), "max": -float("inf"),
             "argmax": -float("inf"), "logsumexp": -float("inf"), "amin": float("inf"), "min": float("inf"),
             "argmin": float("inf"), "any": False, "all": True}
_CONTRACT = {"matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "addmm", "baddbmm"}
_MIXING = {"softmax", "log_softmax", "_softmax", "cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "sort",
           "argsort", "flip", "roll", "diff", "topk", "kthvalue", "median", "mode", "nanmedian", "quantile"}
_VIEWS = {"unsqueeze", "squeeze", "transpose", "permute", "t", "__get__", "reshape", "view", "expand",
          "broadcast_to", "expand_as"}


class JaggedTile(Tile):
    """One block of a jagged loop: positions [begin, end) of the loop to the longest lane; `lanes[i]` ends
    lane i, the lanes' axes running along the enclosing tiles `parents`."""

    __slots__ = ("lanes", "parents")

    def __init__(self, begin: int, end: int, block_size: int, count: int, lanes: torch.Tensor,
                 parents: Sequence[Tile]):
        super().__init__(begin, end, block_size, count)
        self.lanes = lanes
        self.parents = tuple(parents)


class JaggedUseError(RuntimeError):
    """A jagged tile used where the eager reference cannot tell which lane a position belongs to."""


class Axes:
    """The tiles each live tensor's axes run along (by tensor identity), and the masks they imply."""

    def __init__(self) -> None:
        self._labels: dict[int, tuple[weakref.ref, Labels]] = {}
        self._keys: list[tuple[Any, Any]] = []  # (converted subscript key, the key with its Tiles)
        self.quiet = 0  # > 0 while hl functions compute with torch: they label their results themselves

    @contextmanager
    def unlabelled(self) -> Iterator[None]:
        """Torch calls inside an hl function are its own business: not labelled, never masked."""
        self.quiet += 1
        try:
            yield
        finally:
            self.quiet -= 1

    def of(self, t: Any) -> Labels | None:
        entry = self._labels.get(id(t)) if isinstance(t, torch.Tensor) else None
        return entry[1] if entry is not None and entry[0]() is t else None

    def set(self, t: torch.Tensor, labels: Labels) -> torch.Tensor:
        if len(labels) == t.dim() and any(lab is not None for lab in labels):
            key = id(t)
            self._labels[key] = (weakref.ref(t, lambda _, k=key: self._labels.pop(k, None)), tuple(labels))
        else:
            self._labels.pop(id(t), None)
        return t

    def remember_key(self, converted: Any, original: Any) -> None:
        """A subscript key as `index_key` converted it, and as written (its Tiles)."""
        self._keys = [*self._keys[-7:], (converted, original)]

    def original_key(self, converted: Any) -> Any:
        return next((o for c, o in reversed(self._keys) if c is converted), converted)

    def valid(self, labels: Labels, shape: Sequence[int]) -> torch.Tensor | None:
        """Where positions of a value with these axes are valid (None: no jagged axis)."""
        with self.unlabelled():
            return self._valid(labels, shape)

    def _valid(self, labels: Labels, shape: Sequence[int]) -> torch.Tensor | None:
        mask = None
        for axis, lab in enumerate(labels):
            if not isinstance(lab, JaggedTile):
                continue
            view = [1] * len(shape)
            view[axis] = -1
            positions = lab.index.reshape(view)
            try:
                axes = [next(i for i, other in enumerate(labels) if other is p) for p in lab.parents]
            except StopIteration:
                raise JaggedUseError(
                    "a jagged tile's positions are used without the enclosing tiles its lanes run along (index "
                    "it together with them, as `x[tile_b, tile_k]` or `starts[:, None] + tile_k.index[None, :]`)"
                ) from None
            order = sorted(range(len(axes)), key=lambda i: axes[i])
            lanes = lab.lanes.permute(order) if len(order) > 1 else lab.lanes
            lane_view = [1] * len(shape)
            for i in order:
                lane_view[axes[i]] = lab.lanes.shape[i]
            ok = positions < lanes.reshape(lane_view)
            mask = ok if mask is None else mask & ok
        return None if mask is None else mask.expand(tuple(shape))

    def masked(self, t: torch.Tensor, labels: Labels, fill: Any = 0) -> torch.Tensor:
        """`t` with `fill` at its invalid positions, labelled."""
        with self.unlabelled():
            mask = self.valid(labels, t.shape)
            out = t if mask is None else torch.where(mask, t, torch.as_tensor(fill, dtype=t.dtype))
        return self.set(out, labels)


def key_labels(base: Labels | None, key: Any, ndim: int) -> Labels:
    """The axes of `x[key]` for an `x` whose axes are `base`: a Tile gives its own, `None` a new one, `:`
    keeps x's, an int drops it, a tensor index gives the index's (when it is the only one)."""
    items = key if isinstance(key, tuple) else (key,)
    base = base or (None,) * ndim
    out: list[Tile | None] = []
    dim = 0
    for i, item in enumerate(items):
        if item is None:
            out.append(None)
        elif item is Ellipsis:
            rest = ndim - dim - sum(1 for x in items[i + 1:] if x is not None and x is not Ellipsis)
            out += base[dim:dim + rest]
            dim += rest
        elif isinstance(item, Tile):
            out.append(item)
            dim += 1
        elif isinstance(item, slice):
            out.append(base[dim] if item == slice(None) else None)
            dim += 1
        elif isinstance(item, torch.Tensor) and item.dim() > 0:
            out += [None] * item.dim()
            dim += 1
        else:
            dim += 1
    return tuple(out) + tuple(base[dim:])


def _broadcast(shape: Sequence[int], inputs: list[tuple[Sequence[int], Labels | None]]) -> Labels:
    """Axes of a broadcast result: each input's labelled axis of the result's size, aligned from the right
    (two different tiles on one axis: unknown)."""
    n = len(shape)
    out: list[Tile | None] = [None] * n
    for size, labels in inputs:
        if labels is None:
            continue
        off = n - len(size)
        for i, lab in enumerate(labels):
            if lab is not None and size[i] == shape[off + i]:
                out[off + i] = lab if out[off + i] in (None, lab) else None
    return tuple(out)


def _dims(args: tuple, kwargs: dict, ndim: int) -> tuple[int, ...]:
    dim = kwargs.get("dim", args[1] if len(args) > 1 and not isinstance(args[1], bool) else None)
    if dim is None:
        return tuple(range(ndim))
    dims = dim if isinstance(dim, list | tuple) else (dim,)
    return tuple(d % ndim for d in dims)


class AxesMode(TorchFunctionMode):
    """While a jagged kernel runs: labels every torch result from its inputs', and masks what needs it."""

    def __init__(self, axes: Axes):
        super().__init__()
        self.axes = axes

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        axes = self.axes
        if axes.quiet:
            return func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        if name == "__setitem__":
            return self._store(func, args)
        if name == "__getitem__":  # a load when its key holds tiles, else a view of a value
            key = axes.original_key(args[1])
            result = func(*args, **kwargs)
            if isinstance(result, torch.Tensor):
                labels = key_labels(axes.of(args[0]), key, args[0].dim())
                tiles = any(isinstance(k, Tile) for k in (key if isinstance(key, tuple) else (key,)))
                return axes.masked(result, labels) if tiles else axes.set(result, labels)
            return result
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        labelled = [(t, axes.of(t)) for t in tensors]
        if not any(lab for _, lab in labelled):
            return func(*args, **kwargs)
        if name in _MIXING and _mixes_jagged(args, kwargs, axes):
            raise JaggedUseError(f"the eager reference cannot mask `{name}` along a jagged tile's axis")
        if name in _IDENTITY and isinstance(args[0], torch.Tensor):
            return self._reduce(func, name, args, kwargs)
        if name in _CONTRACT:
            args = self._contract(name, args)
        result = func(*args, **kwargs)
        self._label(func, name, result, args, kwargs, labelled)
        return result

    def _store(self, func: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """`x[key] = value`: a jagged key's invalid positions keep their old values."""
        target, converted, value = args
        key = self.axes.original_key(converted)
        labels = key_labels(self.axes.of(target), key, target.dim())
        region = target[converted]
        mask = self.axes.valid(labels, region.shape) if isinstance(region, torch.Tensor) else None
        if mask is not None:
            value = torch.where(mask, torch.as_tensor(value, dtype=target.dtype), region)
        return func(target, converted, value)

    def _reduce(self, func: Callable[..., Any], name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        x = args[0]
        labels = self.axes.of(x) or (None,) * x.dim()
        dims = _dims(args, kwargs, x.dim())
        if any(isinstance(labels[d], JaggedTile) for d in dims):
            mask = self.axes.valid(labels, x.shape)
            fill = _IDENTITY[name]
            if x.dtype == torch.bool:
                fill = bool(fill)
            elif not x.dtype.is_floating_point and fill in (float("inf"), -float("inf")):
                info = torch.iinfo(x.dtype)
                fill = info.max if fill > 0 else info.min
            x = torch.where(mask, x, torch.as_tensor(fill, dtype=x.dtype))
        result = func(x, *args[1:], **kwargs)
        keep = kwargs.get("keepdim", len(args) > 2 and args[2] is True)
        out = tuple(None if i in dims else lab for i, lab in enumerate(labels) if keep or i not in dims)
        for r in result if isinstance(result, tuple) else (result,):
            if isinstance(r, torch.Tensor) and r.dim() == len(out):
                self.axes.set(r, out)
        return result

    def _contract(self, name: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """A product contracting a jagged axis: invalid positions of both operands are 0."""
        first = 1 if name in ("addmm", "baddbmm") else 0
        a, b = args[first], args[first + 1]
        la, lb = self.axes.of(a), self.axes.of(b)
        if la is None or lb is None or a.dim() < 2 or b.dim() < 2:
            return args
        if isinstance(la[-1], JaggedTile) or isinstance(lb[-2], JaggedTile):
            a, b = self.axes.masked(a, la), self.axes.masked(b, lb)
        return (*args[:first], a, b, *args[first + 2:])

    def _label(self, func: Callable[..., Any], name: str, result: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any], labelled: list[tuple[torch.Tensor, Labels | None]]) -> None:
        if not isinstance(result, torch.Tensor):
            return
        labels: Labels | None = None
        if name in _CONTRACT:
            first = 1 if name in ("addmm", "baddbmm") else 0
            a, b = args[first], args[first + 1]
            la, lb = self.axes.of(a) or (None,) * a.dim(), self.axes.of(b) or (None,) * b.dim()
            if a.dim() >= 2 and b.dim() >= 2:
                batch = _broadcast(result.shape[:-2], [(a.shape[:-2], la[:-2]), (b.shape[:-2], lb[:-2])])
                labels = (*batch, la[-2], lb[-1])
        elif name in _VIEWS:
            labels = _view_labels(name, result, args, self.axes)
        elif result.shape == torch.broadcast_shapes(*(t.shape for t, _ in labelled)):
            labels = _broadcast(result.shape, [(t.shape, lab) for t, lab in labelled])
        if labels is None or len(labels) != result.dim():
            lost = [lab for _, ls in labelled for lab in ls or () if isinstance(lab, JaggedTile)]
            if lost:
                raise JaggedUseError(f"the eager reference cannot follow a jagged tile's positions through "
                                     f"`{name}`")
            return
        self.axes.set(result, labels)


def _view_labels(name: str, result: torch.Tensor, args: tuple[Any, ...], axes: Axes) -> Labels | None:
    x = args[0]
    labels = axes.of(x)
    if labels is None:
        return None
    if name == "unsqueeze":
        d = args[1] % result.dim()
        return (*labels[:d], None, *labels[d:])
    if name in ("transpose", "t") or (name == "__get__" and result.dim() == 2 and x.dim() == 2
                                      and result.shape == x.shape[::-1]):
        d0, d1 = (args[1], args[2]) if name == "transpose" else (0, 1)
        out = list(labels)
        out[d0 % x.dim()], out[d1 % x.dim()] = out[d1 % x.dim()], out[d0 % x.dim()]
        return tuple(out)
    if name == "permute":
        order = args[1] if len(args) == 2 and isinstance(args[1], list | tuple) else args[1:]
        return tuple(labels[d % x.dim()] for d in order)
    if result.shape == x.shape:
        return labels
    if name in ("expand", "broadcast_to", "expand_as"):
        return _broadcast(result.shape, [(x.shape, labels)])
    if name == "squeeze":
        gone = set(range(x.dim())) if len(args) == 1 else {d % x.dim() for d in _as_tuple(args[1])}
        return tuple(lab for i, (lab, n) in enumerate(zip(labels, x.shape, strict=True)) if not (n == 1 and i in gone))
    return None


def _as_tuple(dim: Any) -> tuple[int, ...]:
    return tuple(dim) if isinstance(dim, list | tuple) else (dim,)


def _mixes_jagged(args: tuple[Any, ...], kwargs: dict[str, Any], axes: Axes) -> bool:
    """Does a shape-keeping op that mixes positions along a dim (softmax, cumsum, flip, ...) run along a
    jagged axis?"""
    x = args[0]
    labels = axes.of(x) if isinstance(x, torch.Tensor) else None
    if not labels:
        return False
    dim = kwargs.get("dim", kwargs.get("dims", args[1] if len(args) > 1 else None))
    dims = range(x.dim()) if dim is None else [d % x.dim() for d in _as_tuple(dim) if isinstance(d, int)]
    return any(isinstance(labels[d], JaggedTile) for d in dims)
