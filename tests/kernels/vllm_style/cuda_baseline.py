"""A vLLM-style op whose autotune_baseline_fn calls a CUDA-only custom op (written for helion-ls' tests): on a
TPU the check says so and compares with the eager reference."""

from typing import Any

import helion
import helion.language as hl
import torch
from vllm.backends.compute.kernels.helion.case_key import CaseKey
from vllm.backends.compute.kernels.helion.register import register_kernel


def inputs() -> dict[CaseKey, tuple[Any, ...]]:
    x = torch.randn(16, 256, device="cuda", dtype=torch.float32)
    return {CaseKey({"n": 256, "m": 16}): (x,)}


def gpu_baseline(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    torch.ops._C.gelu_tanh_and_mul(out, x)
    return out


@register_kernel(config_picker=None, input_generator=inputs,
                 helion_settings=helion.Settings(autotune_baseline_fn=gpu_baseline))
def halve(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.shape):
        out[tile] = x[tile] * 0.5
    return out
