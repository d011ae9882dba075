"""A kernel declared the way vLLM declares its Helion ops (written for helion-ls' tests, not vLLM's code):
`register_kernel` with `helion.Settings(autotune_baseline_fn=...)` and an input generator of case keys."""

from itertools import product
from typing import Any

import helion
import helion.language as hl
import torch
from vllm.kernels.helion.case_key import CaseKey
from vllm.kernels.helion.register import register_kernel


def make_cases() -> dict[CaseKey, tuple[Any, ...]]:
    cases = {}
    for width, rows in product([256, 512], [8, 16, 64, 128]):
        x = torch.randn(rows, width, device="cuda", dtype=torch.float32)
        weight = torch.rand(width, device="cuda", dtype=torch.float32)
        out = torch.empty_like(x)
        cases[CaseKey({"width": width, "rows": rows})] = (out, x, weight, 1e-5)
    return cases


def scaled_rows_reference(out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, eps: float) -> None:
    rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    out.copy_(x * rms * weight)


def pick(args: tuple[Any, ...], keys: list[CaseKey]) -> CaseKey | None:
    return keys[0] if keys else None


@register_kernel(
    mutates_args=["out"],
    config_picker=pick,
    input_generator=make_cases,
    helion_settings=helion.Settings(autotune_baseline_fn=scaled_rows_reference, backend="cute"),
)
def scaled_rows(out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, eps: float) -> None:
    rows, width = x.shape
    hl.specialize(width)
    for tile_m in hl.tile(rows):
        row = x[tile_m, :]
        rms = torch.rsqrt(torch.mean(row * row, dim=-1, keepdim=True) + eps)
        out[tile_m, :] = row * rms * weight[None, :]
