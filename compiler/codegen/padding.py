"""How the TPU lays out an array in (sublane, 128-lane) tiles, from its element size alone.

Torch-free, so the performance model (which the language server's kernel hover runs) imports no torch."""

from __future__ import annotations

import functools
import math


def sublane_rows_of(itemsize: int) -> int:
    """Rows per (sublanes x 128) vector tile: 8 for 32-bit, 16 for 16-bit, 32 for 8-bit elements."""
    return 8 * max(1, 4 // max(1, itemsize))


def lanes_padded(n: int) -> int:
    """A last dim of `n` elements as laid out: whole 128-lane rows."""
    return -(-n // 128) * 128


def padded_count(shape: tuple[int, ...], itemsize: int) -> int:
    """Elements of `shape` once laid out in (sublane, 128-lane) tiles, as the TPU stores it."""
    return _padded_count(tuple(shape), itemsize)


@functools.lru_cache(maxsize=4096)  # the tuner's plans and model ask for the same few shapes thousands of times
def _padded_count(shape: tuple[int, ...], itemsize: int) -> int:
    rows = sublane_rows_of(itemsize)
    if not shape:
        return rows * 128
    dims = list(shape)
    dims[-1] = lanes_padded(dims[-1])
    if len(dims) >= 2:
        dims[-2] = -(-dims[-2] // rows) * rows
    else:
        dims = [rows] + dims
    return math.prod(dims)
