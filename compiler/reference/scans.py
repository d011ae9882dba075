"""The eager scans: `hl.cumsum` / `hl.cumprod` (torch's, in the input's dtype), `hl.associative_scan` and
`hl.reduce`, and torch's own scan replaced by hl.associative_scan while a kernel runs.

A combine function is applied one position after another (from the end when `reverse`), the running value on
the left — `f(acc, x[i])` — as upstream Helion's eager mode does. Upstream kernels also call
`torch._higher_order_ops.associative_scan` (upstream replaces it by hl.associative_scan in kernels), whose own
implementation needs a GPU: during a kernel launch that name is hl.associative_scan too.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch._higher_order_ops as higher_order_ops


def cumulative(fn: Callable[..., torch.Tensor], x: torch.Tensor, dim: int, reverse: bool) -> torch.Tensor:
    """torch.cumsum / torch.cumprod (`fn`) in x's dtype, from the end of `dim` when `reverse`."""
    if reverse:
        return fn(x.flip(dim), dim, dtype=x.dtype).flip(dim)
    return fn(x, dim, dtype=x.dtype)


def associative_scan(combine_fn: Callable[..., Any], input_tensor: Any, dim: int, reverse: bool = False) -> Any:
    """Inclusive scan of a tensor or a tuple of tensors of one shape, in their dtypes. A tuple's combine
    function takes (left_tuple, right_tuple), or with four or more parameters the tensors unpacked."""
    several = isinstance(input_tensor, tuple | list)
    leaves = tuple(input_tensor) if several else (input_tensor,)
    unpacked = several and len(inspect.signature(combine_fn).parameters) >= 4

    def combine(left: tuple[torch.Tensor, ...], right: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        if not several:
            return (combine_fn(left[0], right[0]),)
        return tuple(combine_fn(*left, *right) if unpacked else combine_fn(left, right))

    dim %= leaves[0].dim()
    n = leaves[0].size(dim)
    acc: tuple[torch.Tensor, ...] | None = None
    out: list[tuple[torch.Tensor, ...]] = [()] * n
    for k in (reversed(range(n)) if reverse else range(n)):
        cur = tuple(leaf.select(dim, k) for leaf in leaves)
        acc = cur if acc is None else tuple(c.to(x.dtype) for c, x in zip(combine(acc, cur), cur, strict=True))
        out[k] = acc
    result = tuple(torch.stack(column, dim) for column in zip(*out, strict=True)) if n else leaves
    return result if several else result[0]


def reduce(combine_fn: Callable[..., Any], input_tensor: Any, dim: int | None = None, other: Any = 0,
           keep_dims: bool = False) -> Any:
    """The combination of every element along `dim` (every element when None), folded one after another; the
    eager tensors hold no padding, so `other` (the padding's value in compiled code) is not used."""
    several = isinstance(input_tensor, tuple | list)
    leaves = tuple(input_tensor) if several else (input_tensor,)
    dims = range(leaves[0].dim()) if dim is None else [dim % max(leaves[0].dim(), 1)]
    for axis in sorted(dims, reverse=True):
        scanned = associative_scan(combine_fn, leaves if several else leaves[0], axis)
        scanned = tuple(scanned) if several else (scanned,)
        n = leaves[0].size(axis)
        leaves = tuple(x.narrow(axis, n - 1, 1) if keep_dims else x.select(axis, n - 1) for x in scanned)
    return leaves if several else leaves[0]


def _torch_scan(combine_fn: Callable[..., Any], xs: Any, dim: int, reverse: bool = False,
                combine_mode: str = "pointwise") -> Any:
    return associative_scan(combine_fn, xs, dim, reverse)


@contextlib.contextmanager
def torch_scan_replaced() -> Iterator[None]:
    """`torch._higher_order_ops.associative_scan` is the eager scan for the duration of a kernel call."""
    saved = higher_order_ops.associative_scan
    higher_order_ops.associative_scan = _torch_scan
    try:
        yield
    finally:
        higher_order_ops.associative_scan = saved
