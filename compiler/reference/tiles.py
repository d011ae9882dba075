"""Tiles as index ranges, and the per-launch assignment of block sizes to tiled dimensions.

A `Tile` is one block of an `hl.tile` loop: the half-open range [begin, end) of one dimension, clamped at
the loop's end for a partial last block. `Launch` hands out block sizes: each tiled dimension takes the next
entry of the requested `block_sizes` the first time its call site runs (later runs of the same site, e.g. an
inner loop re-entered by every outer iteration, reuse it), falling back to a default when the list is short.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import CodeType, FrameType
from typing import Any

import torch

from compiler.reference.races import RacingStores

DEFAULT_MAX_BLOCK = 128


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def default_block_size(extent: int) -> int:
    """A power of two covering small extents, capped so big loops still run several blocks."""
    return min(DEFAULT_MAX_BLOCK, next_power_of_2(extent))


class Tile:
    """One block [begin, end) of a tiled loop of `count` blocks, each `block_size` long (the last may be short)."""

    __slots__ = ("begin", "end", "block_size", "count", "axes")

    def __init__(self, begin: int, end: int, block_size: int, count: int):
        self.begin = begin
        self.end = end
        self.block_size = block_size
        self.count = count
        self.axes: Any = None  # a jagged kernel's jagged.Axes: `index` is labelled as running along this tile

    @property
    def id(self) -> int:
        """Helion's definition: `begin // block_size`."""
        return self.begin // self.block_size

    @property
    def index(self) -> torch.Tensor:
        positions = torch.arange(self.begin, self.end, dtype=torch.int32)
        return positions if self.axes is None else self.axes.set(positions, (self,))

    def as_slice(self) -> slice:
        return slice(self.begin, self.end)

    # arithmetic on a tile is on its positions, as in Helion (`x[tile_pair + rot_half]`: vLLM's rotary embedding)
    def __add__(self, other: object) -> torch.Tensor:
        return self.index + other

    def __radd__(self, other: object) -> torch.Tensor:
        return other + self.index

    def __sub__(self, other: object) -> torch.Tensor:
        return self.index - other

    def __rsub__(self, other: object) -> torch.Tensor:
        return other - self.index

    def __mul__(self, other: object) -> torch.Tensor:
        return self.index * other

    def __rmul__(self, other: object) -> torch.Tensor:
        return other * self.index

    def __repr__(self) -> str:
        return f"Tile({self.begin}:{self.end}, block_size={self.block_size})"


def index_key(key: object, base: object = None) -> object:
    """Turn Tiles inside a subscript key into slices; every other key is returned unchanged.

    A tile over a dim of size 1 of `base` (a tensor) takes that whole dim, which then broadcasts, as Helion
    does for e.g. a [1, N] bias indexed `bias[tile_m, tile_n]`; a single position in a dim of size 1 reads its
    only element, whatever the position (Helion drops a size-1 dim's offset: flex attention reads a block mask
    made for one head, [1, 1, 1], at every head, as torch broadcasts it).
    """
    shape = tuple(base.shape) if isinstance(base, torch.Tensor) else None
    keys = key if type(key) is tuple else (key,)
    plain = shape is not None and not any(k is None or k is Ellipsis for k in keys)
    out = []
    for dim, k in enumerate(keys):
        if isinstance(k, Tile):
            broadcast = plain and dim < len(shape) and shape[dim] == 1 and k.end > 1
            out.append(slice(None) if broadcast else k.as_slice())
        elif plain and dim < len(shape) and shape[dim] == 1 and _position(k):
            out.append(0)
        else:
            out.append(k)
    vectors = [i for i, k in enumerate(out) if isinstance(k, torch.Tensor) and k.ndim == 1 and k.dtype != torch.bool]
    if len(vectors) > 1 and not any(isinstance(k, torch.Tensor) and k.ndim > 1 for k in out):
        # several 1-d position tensors (`cache[pos, hl.arange(d)]`): in Helion each adds its own dim, in order
        for n, i in enumerate(vectors):
            out[i] = out[i].reshape((-1,) + (1,) * (len(vectors) - 1 - n))
    return tuple(out) if type(key) is tuple else out[0]


def sizes(value: object) -> object:
    """A size argument with each Tile as its length: Helion reads a tile in a shape (`x.reshape([tile_b, 2, h])`)
    as its block, and the eager block of a tile holds `end - begin` elements (fewer in a partial last tile)."""
    if isinstance(value, Tile):
        return value.end - value.begin
    if type(value) in (list, tuple):
        return type(value)(v.end - v.begin if isinstance(v, Tile) else v for v in value)
    return value


def _position(k: object) -> bool:
    """One position: an int, or a 0-d integer tensor."""
    if isinstance(k, torch.Tensor):
        return k.ndim == 0 and not k.dtype.is_floating_point and k.dtype != torch.bool
    return isinstance(k, int) and not isinstance(k, bool)


def iter_tiles(begin: int, end: int, block_size: int) -> Iterator[Tile]:
    count = max(0, cdiv(end - begin, block_size))
    for start in range(begin, end, block_size):
        yield Tile(start, min(start + block_size, end), block_size, count)


class Launch:
    """Block-size bookkeeping for one kernel call."""

    def __init__(self, code: CodeType, block_sizes: Sequence[int] | None, tunables: Mapping[str, Any] | None = None,
                 axes: Any = None):
        for size in block_sizes or ():
            if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
                raise ValueError(f"block sizes must be positive integers, got {list(block_sizes or ())}")
        self._code = code
        self.tunables = dict(tunables or {})  # hl.register_tunable values by name (the config's)
        self.axes = axes  # jagged.Axes when the kernel calls hl.jagged_tile: which tile each value's axes run along
        self.races = RacingStores()  # races.py: a store that writes an element twice with different values
        self._requested = list(block_sizes or ())
        self._sites: dict[tuple[tuple[CodeType, int], ...], list[int]] = {}
        self.resolved: list[int] = []  # block size per slot, in order of first appearance

    def site(self, frame: FrameType | None) -> tuple[tuple[CodeType, int], ...]:
        """The call chain from the kernel body down to the hl call: inlined helpers get their own sites."""
        chain = []
        while frame is not None:
            chain.append((frame.f_code, frame.f_lasti))
            if frame.f_code is self._code:
                break
            frame = frame.f_back
        return tuple(chain)

    def block_sizes(self, site: tuple[tuple[CodeType, int], ...], defaults: Sequence[int]) -> list[int]:
        """Block sizes for the dims of one call site; `defaults` apply to slots not requested."""
        slots = self._sites.get(site)
        if slots is None:
            slots = []
            for default in defaults:
                slot = len(self.resolved)
                self.resolved.append(self._requested[slot] if slot < len(self._requested) else default)
                slots.append(slot)
            self._sites[site] = slots
        if len(slots) != len(defaults):
            raise ValueError("this hl.tile call site changed its number of dimensions between runs")
        return [self.resolved[slot] for slot in slots]
