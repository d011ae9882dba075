"""vLLM's `current_platform` on a TPU, for the static evaluation of kernel files and their helpers.

vLLM's kernels ask the platform for their 8-bit float type (`current_platform.fp8_dtype()`, through helpers
such as `get_fp8_dtype()` and `get_fp8_min_max()`). vLLM picks its platform when it is imported, from the
hardware and its plugins; this model is the TPU one, as vLLM's TPU platform (vllm-project/tpu-inference,
`tpu_inference/platforms/tpu_platform.py`, read 2026-12-07) answers: `fp8_dtype()` is float8_e5m2 on a TPU
v6e (its device name is "TPU v6e") and float8_e4m3fn on every other TPU (the base `Platform`'s answer,
which vLLM's older in-tree `vllm/platforms/tpu.py` kept); `is_fp8_fnuz()` is False; `is_tpu()` is True and
every other `is_<vendor>()` False. With no chip named (a shape search that is not for one chip) it is
float8_e4m3fn, the type of every TPU but v6e.

The platform is any name `current_platform` imported from a `vllm` module (`vllm.platforms`,
`vllm.backends.platform`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

_FALSE = frozenset({"is_cuda", "is_rocm", "is_cuda_alike", "is_xpu", "is_cpu", "is_out_of_tree", "is_fp8_fnuz",
                    "is_neuron", "is_hpu", "is_unspecified", "is_sleep_mode_available", "use_custom_allreduce"})
_CONSTANTS = {"device_type": "tpu", "device_name": "tpu", "dispatch_key": "XLA", "ray_device_key": "TPU"}


def is_platform(qualname: str | None) -> bool:
    """`qualname` names vLLM's current platform (`vllm.platforms.current_platform`, ...)."""
    return bool(qualname) and qualname.startswith("vllm.") and qualname.endswith(".current_platform")


def fp8_dtype(chip: str | None) -> torch.dtype:
    """What vLLM's TPU platform gives for its 8-bit float type on `chip` (see the module docstring)."""
    return torch.float8_e5m2 if chip == "v6e" else torch.float8_e4m3fn


@dataclass(frozen=True)
class TpuPlatform:
    """`current_platform` on a TPU `chip` (None: not one chip in particular)."""

    chip: str | None

    def attribute(self, attr: str) -> Any:
        """The attribute's value, a `PlatformMethod` for a method it models, else None (not modelled)."""
        if attr in _CONSTANTS:
            return _CONSTANTS[attr]
        if attr in _FALSE or attr in ("fp8_dtype", "is_tpu", "get_device_name", "supports_fp8"):
            return PlatformMethod(self, attr)
        return None


@dataclass(frozen=True)
class PlatformMethod:
    platform: TpuPlatform
    name: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.name == "fp8_dtype":
            return fp8_dtype(self.platform.chip)
        if self.name in ("is_tpu", "supports_fp8"):
            return True
        if self.name == "get_device_name":
            return f"TPU {self.platform.chip or 'v5e'}"
        return False
