"""A block quantizer in vLLM's style (written for helion-ls' tests, not vLLM's code): an input generator whose
cases are one tensor each, written without a tuple, under string keys, and host code reading a dtype's limits
with `torch.finfo`."""

from typing import Any

import helion.language as hl
import torch
from vllm.kernels.helion.register import register_kernel


def make_cases() -> dict[str, Any]:
    cases = {}
    for tokens in [8, 32]:
        for width in [256, 512]:
            cases[f"width_{width}_tokens_{tokens}"] = torch.randn(tokens, 2 * width, device="cuda",
                                                                  dtype=torch.bfloat16)
    return cases


@register_kernel(input_generator=make_cases)
def block_quant_one_arg(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, two_w = x.shape
    w = hl.specialize(two_w) // 2
    out = torch.empty((m, w), device=x.device, dtype=torch.float8_e4m3fn)
    scales = torch.empty((m, 1), device=x.device, dtype=torch.float32)
    floor = 1 / (torch.finfo(torch.float8_e4m3fn).max * 512.0)
    for tile_m in hl.tile(m):
        y = x[tile_m, :w].to(torch.float32) * x[tile_m, w:].to(torch.float32)
        s = torch.clamp(torch.amax(torch.abs(y), dim=-1) / torch.finfo(torch.float8_e4m3fn).max, min=floor)
        scales[tile_m, 0] = s
        out[tile_m, :] = (y / s[:, None]).to(torch.float8_e4m3fn)
    return out, scales
