"""The eager `helion._testing`: the constants upstream's example kernels read from Helion's test helpers.

Upstream fixes them at import from the backend. The values here are the ones the program `check` compares
needs: that of a TPU, which the compiler's front end gives the same names (frontend/upstream_names.py), on a
machine without one, where the reference's tensors live on the CPU.

- `DEVICE` is the CPU, as upstream's Pallas interpret mode has it: what a kernel body passes as `device=`
  must be where its inputs are. (The front end's DEVICE is the TPU; a kernel body can only pass it on.)
- `HALF_DTYPE` is bfloat16, upstream's choice for Pallas on a TPU (TPUs have no float16). Upstream's interpret
  mode picks float16 instead, but check stands for the TPU program: a kernel writing `.to(HALF_DTYPE)` is
  compiled to bfloat16, and a float16 reference would be another computation.
- `LONG_INT_TYPE` is int32, upstream's choice for Pallas, interpreted or not (no 64-bit types on a TPU).

Upstream's harness functions (`run_example`, `do_bench`, ...) run host code, which the eager reference never
runs, so they are not here.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import torch

CONSTANTS: dict[str, Any] = {
    "DEVICE": torch.device("cpu"),
    "HALF_DTYPE": torch.bfloat16,
    "LONG_INT_TYPE": torch.int32,
}


def _missing(name: str) -> Any:
    raise AttributeError(
        f"helion._testing.{name} is not available in the eager reference (supported: {', '.join(CONSTANTS)})"
    )


def testing_module() -> ModuleType:
    """A fresh `helion._testing` holding CONSTANTS."""
    module = ModuleType("helion._testing", "Eager helion._testing: upstream's constants as check needs them.")
    for name, value in CONSTANTS.items():
        setattr(module, name, value)
    module.__getattr__ = _missing  # type: ignore[method-assign]
    return module
