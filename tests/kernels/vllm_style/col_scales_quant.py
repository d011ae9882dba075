"""A per-group fp8 quantizer in vLLM's style (written for helion-ls' tests, not vLLM's code): its scales are made
column-major with `torch.empty_strided`, which the kernel's host code asserts, and the groups of a row are
unrolled with `hl.static_range`."""

from itertools import product
from typing import Any

import helion
import helion.language as hl
import torch
from vllm.kernels.helion.case_key import CaseKey
from vllm.kernels.helion.register import register_kernel

GROUP = 128
LIMIT = 448.0


def make_cases() -> dict[CaseKey, tuple[Any, ...]]:
    cases = {}
    for width, tokens in product([256, 512], [8, 32]):
        x = torch.randn(tokens, width, device="cuda", dtype=torch.bfloat16)
        q = torch.empty(tokens, width, device="cuda", dtype=torch.float8_e4m3fn)
        scales = torch.empty_strided((tokens, width // GROUP), (1, tokens), device="cuda", dtype=torch.float32)
        cases[CaseKey({"width": width, "tokens": tokens})] = (x, q, scales)
    return cases


def col_scales_reference(x: torch.Tensor, q: torch.Tensor, scales: torch.Tensor) -> None:
    groups = x.float().view(x.shape[0], -1, GROUP)
    s = groups.abs().amax(dim=-1).clamp(min=1e-10) / LIMIT
    scales.copy_(s)
    q.copy_((groups / s[:, :, None]).view(x.shape).to(q.dtype))


@register_kernel(
    mutates_args=["q", "scales"],
    input_generator=make_cases,
    helion_settings=helion.Settings(autotune_baseline_fn=col_scales_reference),
)
def col_scales_quant(x: torch.Tensor, q: torch.Tensor, scales: torch.Tensor) -> None:
    tokens, width = x.shape
    groups = hl.specialize(width) // GROUP
    assert scales.stride() == (1, tokens)
    assert not scales.is_contiguous()
    for tile_m in hl.tile(tokens):
        for g in hl.static_range(groups):
            blk = x[tile_m, g * GROUP:(g + 1) * GROUP].to(torch.float32)
            s = torch.clamp(torch.amax(torch.abs(blk), dim=-1), min=1e-10) / LIMIT
            scales[tile_m, g] = s
            q[tile_m, g * GROUP:(g + 1) * GROUP] = (blk / s[:, None]).to(torch.float8_e4m3fn)
