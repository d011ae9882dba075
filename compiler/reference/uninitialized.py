"""Allocations a kernel leaves uninitialised (`torch.empty`, `empty_like`, `new_empty`) are filled as TPU
interpret mode fills them: NaN for floats, the largest value for integers.

Their contents are undefined; what a kernel never writes (rows past a jagged tensor's last offset) then reads
the same in the eager reference and in the generated code run in interpret mode, and agrees as NaN in both,
instead of NaN against whatever torch's allocator returned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

_EMPTY = {torch.empty, torch.empty_like, torch.Tensor.new_empty, torch.empty_strided}


def fill_uninitialized(t: torch.Tensor) -> torch.Tensor:
    """`t` filled as interpret mode fills memory nothing has written yet."""
    if t.dtype.is_floating_point or t.dtype.is_complex:
        return t.fill_(float("nan"))
    if t.dtype == torch.bool:
        return t.fill_(True)
    return t.fill_(torch.iinfo(t.dtype).max)


class UninitializedAsNaN(TorchFunctionMode):
    """Active while a kernel runs; every other torch function runs unchanged."""

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        result = func(*args, **(kwargs or {}))
        if func in _EMPTY and isinstance(result, torch.Tensor):  # (the mode is off inside its own handler)
            fill_uninitialized(result)
        return result
