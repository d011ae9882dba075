"""The eager `helion.language` (hl): loops over index ranges and tensor creation on top of torch.

Everything here is plain torch; block sizes come from the running kernel's `Launch`.
"""

from __future__ import annotations

import itertools
import operator
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from types import ModuleType
from typing import Any

import torch

from compiler.reference.autotuner import Fragment
from compiler.reference.jagged import JaggedTile
from compiler.reference.kernel import Runtime
from compiler.reference.matmul_mode import accumulate_dtype
from compiler.reference.scans import associative_scan, cumulative, reduce
from compiler.reference.tiles import Tile, default_block_size, index_key, iter_tiles

INDEX_DTYPE = torch.int32

_PUBLIC = ("tile", "jagged_tile", "split", "join", "grid", "static_range", "register_block_size", "register_tunable", "barrier", "load", "store", "specialize", "zeros", "full", "arange", "dot", "rand",
           "cumsum", "cumprod", "associative_scan", "reduce", "atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or", "atomic_xor", "atomic_xchg",
           "atomic_cas")
_U32 = 0xFFFFFFFF
_RAND_MIX = (1, 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D)  # the compiler's per-dim counter multipliers, as uint32


def _uniform(index: torch.Tensor, seed: int) -> torch.Tensor:
    """The compiler's hl.rand hash, bit for bit: int64 arithmetic kept to the low 32 bits."""
    h = (index * 0x9E3779B1 + seed * 668265263) & _U32
    h = h ^ (h >> 16)
    h = (h * 0x7FEB352D) & _U32
    h = h ^ (h >> 15)
    h = (h * 0x846CA68B) & _U32
    h = h ^ (h >> 16)
    return (h >> 8).to(torch.float32) * (1.0 / 16777216.0)


def _dims(value: Any) -> tuple[list[Any], bool]:
    """(entries, several) for an extent argument: an int-like or a list/tuple/torch.Size of them."""
    if isinstance(value, list | tuple):
        return list(value), True
    return [value], False


def _bounds(begin_or_end: Any, end_or_none: Any, what: str) -> tuple[list[int], list[int], bool]:
    if end_or_none is None:
        ends, several = _dims(begin_or_end)
        begins = [0] * len(ends)
    else:
        begins, several = _dims(begin_or_end)
        ends, several_end = _dims(end_or_none)
        if several != several_end or len(begins) != len(ends):
            raise ValueError(f"{what}: begin and end must have the same number of dimensions")
    return [operator.index(b) for b in begins], [operator.index(e) for e in ends], several


def _size(entry: Any) -> int:
    return entry.end - entry.begin if isinstance(entry, Tile) else operator.index(entry)


def _shape(shape: Any) -> list[int]:
    entries, _ = _dims(shape)
    return [_size(e) for e in entries]


def _combine(per_dim: list[list[Any]], several: bool) -> Iterator[Any]:
    for combo in itertools.product(*per_dim):
        yield combo if several else combo[0]


def _dot_result_dtype(a: torch.Tensor, b: torch.Tensor) -> torch.dtype:
    if a.dtype.itemsize == 1 and a.dtype.is_floating_point and b.dtype.itemsize == 1 and b.dtype.is_floating_point:
        return torch.float32  # fp8 x fp8 gives float32, as in Helion
    promoted = torch.promote_types(a.dtype, b.dtype)
    return promoted if promoted.is_floating_point else torch.int32


class Language:
    """hl functions bound to one module's `Runtime`."""

    def __init__(self, runtime: Runtime):
        self._runtime = runtime

    def tile(self, begin_or_end: Any, end_or_none: Any = None, block_size: Any = None) -> Iterator[Any]:
        """Blocks of each dim in row-major order; a list of extents yields tuples of Tiles."""
        begins, ends, several = _bounds(begin_or_end, end_or_none, "hl.tile")
        if isinstance(block_size, list | tuple):
            given = list(block_size)
            if len(given) != len(ends):
                raise ValueError(f"hl.tile: {len(given)} block sizes for {len(ends)} dimensions")
        else:
            given = [block_size] * len(ends)
        missing = [i for i, size in enumerate(given) if size is None]
        launch = self._runtime.current("hl.tile")
        if missing:
            defaults = [default_block_size(ends[i] - begins[i]) for i in missing]
            for i, size in zip(
                missing, launch.block_sizes(launch.site(sys._getframe(1)), defaults), strict=True
            ):
                given[i] = size
        sizes = [operator.index(s) for s in given]
        if any(s <= 0 for s in sizes):
            raise ValueError(f"hl.tile: block sizes must be positive, got {sizes}")
        per_dim = [list(iter_tiles(b, e, s)) for b, e, s in zip(begins, ends, sizes, strict=True)]
        for tiles in per_dim if launch.axes is not None else ():
            for t in tiles:
                t.axes = launch.axes
        return _combine(per_dim, several)

    def jagged_tile(self, lanes: Any) -> Iterator[Tile]:
        """Blocks of positions up to the longest lane; position k of lane i is valid below `lanes[i]`, each
        axis of `lanes` running along an enclosing tile (jagged.py masks what reads, writes and reduces)."""
        launch = self._runtime.current("hl.jagged_tile")
        parents = launch.axes.of(lanes) if launch.axes is not None else None
        if not isinstance(lanes, torch.Tensor) or lanes.dim() == 0 or not parents or None in parents:
            raise ValueError("hl.jagged_tile(lanes) takes a tensor of per-lane ends whose every axis runs along an "
                             "enclosing hl.tile (e.g. `lengths[tile_b]`)")
        end = max(int(lanes.max()), 0) if lanes.numel() else 0
        size = launch.block_sizes(launch.site(sys._getframe(1)), [default_block_size(end)])[0]
        tiles = [JaggedTile(t.begin, t.end, size, t.count, lanes, parents) for t in iter_tiles(0, end, size)]
        for t in tiles:
            t.axes = launch.axes
        return iter(tiles)

    def grid(self, begin_or_end: Any, end_or_none: Any = None, step: Any = None) -> Iterator[Any]:
        """Scalar indices (ints, or tuples of ints for a list of extents)."""
        begins, ends, several = _bounds(begin_or_end, end_or_none, "hl.grid")
        steps = list(step) if isinstance(step, list | tuple) else [1 if step is None else step] * len(ends)
        ranges = [list(range(b, e, operator.index(s))) for b, e, s in zip(begins, ends, steps, strict=True)]
        return _combine(ranges, several)

    def static_range(self, begin_or_end: int, end_or_none: int | None = None, step: int = 1) -> Iterator[int]:
        """Python ints, as Helion's unrolled loop binds them."""
        return iter(range(begin_or_end, end_or_none, step) if end_or_none is not None else range(begin_or_end))

    def register_block_size(self, min_or_max: Any, max_or_none: Any = None) -> int:
        """A block size for a dim, taken from the launch's list like a tiled dim."""
        low, high = (1, min_or_max) if max_or_none is None else (min_or_max, max_or_none)
        low, high = operator.index(low), operator.index(high)
        default = max(low, default_block_size(high))
        launch = self._runtime.current("hl.register_block_size")
        return launch.block_sizes(launch.site(sys._getframe(1)), [default])[0]

    def register_tunable(self, name: str, fragment: Fragment) -> Any:
        """The launch config's value for `name`, else the fragment's default: the value the compiled kernel
        was built with, when the caller passes its config."""
        if not isinstance(name, str) or not isinstance(fragment, Fragment):
            raise TypeError("hl.register_tunable(name, fragment) takes a name and a helion.autotuner fragment")
        tunables = self._runtime.current("hl.register_tunable").tunables
        if name not in tunables:
            return fragment.default
        if not fragment.allows(tunables[name]):
            raise ValueError(f"config {name}={tunables[name]!r} is not a value of {type(fragment).__name__}")
        return tunables[name]

    def barrier(self) -> None:
        """Between two grid loops: every tile of the first is done before the second starts, which running
        them one after the other already is."""

    def specialize(self, value: Any) -> Any:
        return value

    def zeros(self, shape: Any, dtype: torch.dtype = torch.float32, device: Any = None) -> torch.Tensor:
        """(`device` as Helion takes it: the kernel's device, here the CPU.)"""
        return self._labelled(torch.zeros(_shape(shape), dtype=dtype), [(e,) if isinstance(e, Tile) else (None,)
                                                                        for e in _dims(shape)[0]])

    def full(self, shape: Any, value: Any, dtype: torch.dtype = torch.float32, device: Any = None) -> torch.Tensor:
        return self._labelled(torch.full(_shape(shape), value, dtype=dtype), [(e,) if isinstance(e, Tile) else (None,)
                                                                             for e in _dims(shape)[0]])

    def _labelled(self, t: torch.Tensor, per_item: list[tuple[Any, ...]], mask: bool = False) -> torch.Tensor:
        """In a jagged kernel, `t` with its axes labelled by the index items (or shape entries) that made it,
        its invalid jagged positions 0 when `mask`."""
        axes = self._axes()
        if axes is None:
            return t
        labels = tuple(lab for item in per_item for lab in item)
        return axes.masked(t, labels) if mask else axes.set(t, labels)

    def _axes(self) -> Any:
        """The running launch's jagged.Axes (None outside a jagged kernel)."""
        return self._runtime.current("hl").axes if self._runtime.running else None

    def split(self, tensor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The two halves of a last dim of size 2."""
        if tensor.shape[-1:] != (2,):
            raise ValueError(f"hl.split takes a tensor whose last dim is 2, got shape {list(tensor.shape)}")
        first, second = torch.unbind(tensor, dim=-1)
        return first, second

    def join(self, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
        """The two tensors side by side along a new last dim of size 2 (broadcast to one shape first)."""
        if first.dtype != second.dtype:
            raise TypeError(f"hl.join takes two tensors of one dtype, got {first.dtype} and {second.dtype}")
        return torch.stack(torch.broadcast_tensors(first, second), dim=-1)

    def arange(self, *args: Any, dtype: torch.dtype | None = None, **kwargs: Any) -> torch.Tensor:
        return torch.arange(*args, dtype=dtype or INDEX_DTYPE, **kwargs)

    def dot(
        self,
        mat1: torch.Tensor,
        mat2: torch.Tensor,
        acc: torch.Tensor | None = None,
        out_dtype: torch.dtype | None = None,
    ) -> torch.Tensor:
        """Matmul of 2-D or batched 3-D blocks, computed in f32 (ints in int64), plus `acc`."""
        if mat1.dim() != mat2.dim() or mat1.dim() not in (2, 3):
            raise ValueError(
                f"hl.dot takes two 2-D or two 3-D tensors, got shapes {list(mat1.shape)} and {list(mat2.shape)}"
            )
        compute = accumulate_dtype(mat1, mat2)
        result = torch.matmul(mat1.to(compute), mat2.to(compute))
        if acc is not None:
            result = acc.to(torch.promote_types(compute, acc.dtype)) + result
        dtype = out_dtype or (acc.dtype if acc is not None else _dot_result_dtype(mat1, mat2))
        return result.to(dtype)

    def cumsum(self, input_tensor: torch.Tensor, dim: int, reverse: bool = False) -> torch.Tensor:
        """Inclusive sums along `dim` in the input's dtype, from the end when `reverse`."""
        return cumulative(torch.cumsum, input_tensor, dim, reverse)

    def cumprod(self, input_tensor: torch.Tensor, dim: int, reverse: bool = False) -> torch.Tensor:
        """Inclusive products along `dim` in the input's dtype, from the end when `reverse`."""
        return cumulative(torch.cumprod, input_tensor, dim, reverse)

    def associative_scan(self, combine_fn: Any, input_tensor: Any, dim: int, reverse: bool = False) -> Any:
        return associative_scan(combine_fn, input_tensor, dim, reverse)

    def reduce(self, combine_fn: Any, input_tensor: Any, dim: int | None = None, other: Any = 0,
               keep_dims: bool = False) -> Any:
        return reduce(combine_fn, input_tensor, dim, other, keep_dims)

    def rand(self, shape: Any, seed: Any) -> torch.Tensor:
        """Uniform [0, 1) from a hash of (seed, element index): the same values as the compiled kernel."""
        entries, _ = _dims(shape)
        index = torch.zeros((), dtype=torch.int64)
        for axis, e in enumerate(entries):
            idx = e.index.to(torch.int64) if isinstance(e, Tile) else torch.arange(operator.index(e))
            view = [1] * len(entries)
            view[axis] = -1
            index = (index + idx.reshape(view) * _RAND_MIX[len(entries) - 1 - axis]) & _U32
        return _uniform(index.expand(*[_size(e) for e in entries]), int(seed))

    def load(self, tensor: torch.Tensor, index: list[Any], extra_mask: Any = None, eviction_policy: Any = None) -> torch.Tensor:
        """`tensor[index]` where each index item adds its own dims (a tile or a 1-D position tensor: one), read
        masked: a position outside the tensor (a tile running past it) or where `extra_mask` is False reads 0."""
        with self._quiet():
            positions, valid = _gather_positions(tensor, index)
            if extra_mask is not None:
                valid = valid & torch.as_tensor(extra_mask, dtype=torch.bool)
            values = torch.where(valid, tensor[tuple(positions)], torch.zeros((), dtype=tensor.dtype))
        return self._labelled(values, self._item_labels(index), mask=True)

    def _quiet(self) -> AbstractContextManager[Any]:
        """What an hl function computes with torch is not a value of the kernel's (jagged.Axes.unlabelled)."""
        axes = self._axes()
        return nullcontext() if axes is None else axes.unlabelled()

    def _item_labels(self, index: list[Any]) -> list[tuple[Any, ...]]:
        """The tiles each hl.load / hl.store index item's dims run along (a jagged kernel's)."""
        axes = self._axes()
        if axes is None:
            return []
        out: list[tuple[Any, ...]] = []
        for item in index:
            if isinstance(item, Tile):
                out.append((item,))
            elif isinstance(item, torch.Tensor):
                out.append(axes.of(item) or (None,) * item.dim())
            elif isinstance(item, slice):
                out.append((None,))
        return out

    def store(self, tensor: torch.Tensor, index: list[Any], value: Any, extra_mask: Any = None) -> None:
        """`tensor[index] = value`, masked as `load` reads: positions outside the tensor or where `extra_mask`
        is False are left alone, and so are a jagged tile's invalid positions."""
        axes = self._axes()
        labels = tuple(lab for item in self._item_labels(index) for lab in item)
        with self._quiet():
            positions, valid = _gather_positions(tensor, index)
            if extra_mask is not None:
                valid = valid & torch.as_tensor(extra_mask, dtype=torch.bool)
            valid = valid.expand(positions[0].shape) if positions else valid
            jagged = axes.valid(labels, valid.shape) if axes is not None else None
            valid = valid if jagged is None else valid & jagged
            value = torch.as_tensor(value, dtype=tensor.dtype).expand(valid.shape)
            tensor[tuple(p[valid] for p in positions)] = value[valid]

    def _atomic(self, target: torch.Tensor, index: Any, new: Any) -> torch.Tensor:
        key = index_key(tuple(index) if isinstance(index, list) else index, target)
        old = target[key].clone()
        with self._runtime.current("hl").races.suspended():  # an atomic combines what it is given twice
            target[key] = new(old)
        return old

    def atomic_add(self, target: torch.Tensor, index: Any, value: Any, sem: str = "relaxed") -> torch.Tensor:
        """Each selected element gets its value added; at tensor-valued positions one given twice gets both."""
        key = index_key(tuple(index) if isinstance(index, list) else index, target)
        old = target[key].clone()
        element = torch.arange(target.numel()).view(target.shape)[key]  # which element each selection is
        flat = target.contiguous().view(-1)
        added = torch.as_tensor(value).to(target.dtype).expand(element.shape)
        flat.index_add_(0, element.reshape(-1), added.reshape(-1))
        if flat.data_ptr() != target.data_ptr():
            target.copy_(flat.view(target.shape))
        return old

    def atomic_max(self, target: torch.Tensor, index: Any, value: Any, sem: str = "relaxed") -> torch.Tensor:
        return self._atomic(target, index, lambda old: torch.maximum(old, torch.as_tensor(value, dtype=old.dtype)))

    def atomic_min(self, target: torch.Tensor, index: Any, value: Any, sem: str = "relaxed") -> torch.Tensor:
        return self._atomic(target, index, lambda old: torch.minimum(old, torch.as_tensor(value, dtype=old.dtype)))

    def atomic_and(self, target: torch.Tensor, index: Any, value: Any, sem: str = "relaxed") -> torch.Tensor:
        return self._atomic(target, index, lambda old: old & value)

    def atomic_or(self, target: torch.Tensor, index: Any, value: Any, sem: str = "relaxed") -> torch.Tensor:
        return self._atomic(target, index, lambda old: old | value)

    def atomic_xor(self, target: torch.Tensor, index: Any, value: Any, sem: str = "relaxed") -> torch.Tensor:
        return self._atomic(target, index, lambda old: old ^ value)

    def atomic_xchg(self, target: torch.Tensor, index: Any, value: Any, sem: str = "relaxed") -> torch.Tensor:
        return self._atomic(target, index, lambda old: value)

    def atomic_cas(self, target: torch.Tensor, index: Any, expected: Any, value: Any,
                   sem: str = "relaxed") -> torch.Tensor:
        return self._atomic(target, index, lambda old: torch.where(old == expected, value, old))


def _gather_positions(tensor: torch.Tensor, index: list[Any]) -> tuple[list[torch.Tensor], torch.Tensor]:
    """For hl.load / hl.store: one position tensor per dim of `tensor`, clamped into it and broadcast over the
    result's shape (each index item's own dims, in order), and where the unclamped positions are inside."""
    items = list(index)
    if len(items) != tensor.dim():
        raise ValueError(f"hl.load/hl.store: {len(items)} index items for a {tensor.dim()}-d tensor")
    raw: list[torch.Tensor] = []
    for dim, item in enumerate(items):
        if isinstance(item, Tile):
            raw.append(item.index.to(torch.int64))
        elif isinstance(item, slice) and item == slice(None):
            raw.append(torch.arange(tensor.shape[dim]))
        elif isinstance(item, torch.Tensor | int) and not isinstance(item, bool):
            raw.append(torch.as_tensor(item).to(torch.int64))
        else:
            raise TypeError(f"hl.load/hl.store: index item {item!r} is not a tile, a position tensor, an int or ':'")
    tensors = [i for i, item in enumerate(items) if isinstance(item, torch.Tensor) and item.dim() > 0]
    joint = len(tensors) > 1 and len({raw[i].dim() for i in tensors}) == 1 and raw[tensors[0]].dim() > 1
    if joint:  # position tensors of several dims shaped to broadcast together (`x[m[:, None, None], n[None]]`):
        common = torch.broadcast_shapes(*(raw[i].shape for i in tensors))  # torch's advanced indexing
        raw = [raw[i].expand(common) if i in tensors else raw[i] for i in range(len(raw))]
    total = sum(p.dim() for i, p in enumerate(raw) if not (joint and i in tensors[1:]))
    shaped, before, shared = [], 0, 0
    for i, p in enumerate(raw):  # item i takes dims [before, before + p.dim()) of the result
        if joint and i in tensors[1:]:  # a joint item shares the first one's dims
            shaped.append(p.reshape((1,) * shared + tuple(p.shape) + (1,) * (total - shared - p.dim())))
            continue
        shared = before if joint and i == tensors[0] else shared
        shaped.append(p.reshape((1,) * before + tuple(p.shape) + (1,) * (total - before - p.dim())))
        before += p.dim()
    valid = torch.ones((), dtype=torch.bool)
    for dim, p in enumerate(shaped):
        valid = valid & (p >= 0) & (p < tensor.shape[dim])
    full = torch.broadcast_shapes(*(p.shape for p in shaped)) if shaped else ()
    clamped = [p.clamp(0, max(tensor.shape[d] - 1, 0)).expand(full) for d, p in enumerate(shaped)]
    return clamped, valid.expand(full)


def _missing(name: str) -> Any:
    raise AttributeError(
        f"helion.language.{name} is not available in the eager reference (supported: {', '.join(_PUBLIC)})"
    )


def language_module(runtime: Runtime) -> ModuleType:
    """A fresh `helion.language` module object for one exec'd kernel module."""
    module = ModuleType("helion.language", "Eager helion.language over torch (compiler.reference).")
    lang = Language(runtime)
    for name in _PUBLIC:
        setattr(module, name, getattr(lang, name))
    module.Tile = Tile
    module.__getattr__ = _missing  # type: ignore[method-assign]
    return module
