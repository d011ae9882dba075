"""Stores that write one element twice, with different values, in one store: a race in any compiled form.

`C[rows, tile_n] = torch.where(valid, acc, old)` where the masked rows of `rows` point at a valid row (upstream
moe_matmul_ogs sends them to the expert's first token) writes that row with the new values and with its old
ones; which lands depends on the order of the writes, on a TPU as on a GPU, and eager torch keeps the last.
No reference value exists for such an element, so while a kernel runs eagerly this mode stops the store with
`RaceError` (the kernel's line comes with it) instead of letting `check` call the kernel a MISMATCH. Writing the
same value twice is no race. hl.atomic_* combine their duplicates on purpose: the mode is suspended for them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.overrides import TorchFunctionMode


class RaceError(RuntimeError):
    """A store wrote one element twice with different values."""


def _int_positions(target: torch.Tensor, key: Any) -> list[tuple[int, torch.Tensor]] | None:
    """(dim, index tensor) of the integer tensors in a store's key, or None when the key has none, or has what
    this check does not follow (a bool mask, `...`, `None`)."""
    items = key if isinstance(key, tuple) else (key,)
    out, dim = [], 0
    for item in items:
        if item is None or item is Ellipsis or isinstance(item, bool):
            return None
        if isinstance(item, torch.Tensor):
            if item.dtype == torch.bool:
                return None
            if item.dim() > 0 and not item.dtype.is_floating_point:
                out.append((dim, item))
        dim += 1
    return out if out and dim <= target.dim() else None


def _repeats(target: torch.Tensor, positions: list[tuple[int, torch.Tensor]]) -> bool:
    """Do the index tensors name one combination of positions twice? (Slices never repeat an element.)"""
    tensors = torch.broadcast_tensors(*(t.to(torch.int64) % target.shape[d] for d, t in positions))
    combo = torch.zeros_like(tensors[0])
    for (d, _), t in zip(positions, tensors, strict=True):
        combo = combo * target.shape[d] + t
    flat = combo.reshape(-1)
    return flat.numel() > 1 and torch.unique(flat).numel() < flat.numel()


def check_store(target: torch.Tensor, key: Any, value: Any) -> None:
    """Raise RaceError when `target[key] = value` writes an element twice with different values."""
    positions = _int_positions(target, key)
    if positions is None or not _repeats(target, positions):
        return
    element = torch.arange(target.numel()).view(target.shape)[key]
    written = torch.as_tensor(value).to(target.dtype).expand(element.shape).reshape(-1)
    flat = element.reshape(-1)
    order = flat.argsort(stable=True)
    where, values = flat[order], written[order]
    same = where[1:] == where[:-1]
    a, b = values[:-1][same], values[1:][same]
    differ = a != b
    if a.dtype.is_floating_point:
        differ &= ~(a.isnan() & b.isnan())
    if not bool(differ.any()):
        return
    i = int(differ.nonzero()[0])
    at = tuple(int(v) for v in torch.unravel_index(where[:-1][same][i], target.shape))
    raise RaceError(f"one store writes {list(at)} of {list(target.shape)} twice ({a[i].item():.4g} and "
                    f"{b[i].item():.4g}; {int(differ.sum()) - 1} more): a race, its result depends on the order of "
                    "the writes, on a TPU too; write each element once (send a masked position nowhere rather than "
                    "to another row's)")


class RacingStores(TorchFunctionMode):
    """Active while a kernel runs: every `x[key] = value` is checked by `check_store` first."""

    def __init__(self) -> None:
        super().__init__()
        self._suspended = 0

    @contextmanager
    def suspended(self) -> Iterator[None]:
        """For stores that combine their duplicates on purpose (hl.atomic_*)."""
        self._suspended += 1
        try:
            yield
        finally:
            self._suspended -= 1

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        if not self._suspended and getattr(func, "__name__", "") == "__setitem__" and len(args) == 3 \
                and isinstance(args[0], torch.Tensor):
            check_store(*args)
        return func(*args, **(kwargs or {}))
