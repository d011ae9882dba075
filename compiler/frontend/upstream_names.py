"""What the names a kernel file takes from upstream Helion's helpers mean on a TPU, statically.

Upstream's example and pretuned files import `DEVICE`, `HALF_DTYPE`, ... from `helion._testing`; their values
there depend on the backend the process was started with (`HELION_BACKEND=pallas` on a TPU: device `tpu`, half
precision bfloat16 because TPUs have no float16 vector unit, 64-bit integers narrowed to int32). This table is
the one place that says what each means here, for kernel bodies (`frontend.expressions`) and host code alike.
`helion.runtime.get_num_sm(...)` is a call, not a constant: its value is the chip's TensorCore count
(`chips.Chip.tensorcores`), see `num_sm`.
"""

from __future__ import annotations

from typing import Any

import torch

from ..ir.chips import Chip
from .values import DEVICE_SENTINEL

# qualified name -> its value on a TPU
UPSTREAM_NAMES: dict[str, Any] = {
    "helion._testing.DEVICE": DEVICE_SENTINEL,  # the TPU: what `x.device` gives; kernels pass it on
    "helion._testing.HALF_DTYPE": torch.bfloat16,
    "helion._testing.LONG_INT_TYPE": torch.int32,
}

NUM_SM_CALLS = frozenset({"helion.runtime.get_num_sm", "helion.runtime.triton.launcher.get_num_sm"})


def resolve(qualname: str) -> Any:
    """The TPU meaning of `qualname` (`helion._testing.HALF_DTYPE` -> torch.bfloat16), or KeyError."""
    return UPSTREAM_NAMES[qualname]


def num_sm(chip: Chip) -> int:
    """`helion.runtime.get_num_sm(device)` on a TPU: the TensorCores one kernel launch can use (the size of a
    persistent kernel's worker grid)."""
    return chip.tensorcores
