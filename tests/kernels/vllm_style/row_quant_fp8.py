"""A per-row fp8 quantizer in vLLM's style (written for helion-ls' tests, not vLLM's code): one row per grid
step (`block_size=1`) and inner loops over the row, writing 8-bit floats. Under emit_pipeline a one-row block
of 8- or 16-bit values cannot be copied at a row the TPU compiler cannot prove a multiple of its packing."""

from itertools import product
from typing import Any

import helion
import helion.language as hl
import torch
from vllm.kernels.helion.case_key import CaseKey
from vllm.kernels.helion.register import register_kernel

LIMIT = 448.0


def make_cases() -> dict[CaseKey, tuple[Any, ...]]:
    cases = {}
    for tokens, width in product([1, 6, 40], [512, 1024]):
        x = torch.randn(tokens, width, device="cuda", dtype=torch.bfloat16)
        out = torch.empty(tokens, width, device="cuda", dtype=torch.float8_e4m3fn)
        scale = torch.empty(tokens, 1, device="cuda", dtype=torch.float32)
        cases[CaseKey({"tokens": tokens, "width": width})] = (out, x, scale)
    return cases


def row_quant_reference(out: torch.Tensor, x: torch.Tensor, scale: torch.Tensor) -> None:
    s = x.float().abs().amax(dim=-1, keepdim=True).clamp(min=1e-6) / LIMIT
    scale.copy_(s)
    out.copy_((x.float() / s).clamp(-LIMIT, LIMIT).to(out.dtype))


@register_kernel(
    mutates_args=["out", "scale"],
    input_generator=make_cases,
    helion_settings=helion.Settings(autotune_baseline_fn=row_quant_reference),
)
def row_quant_fp8(out: torch.Tensor, x: torch.Tensor, scale: torch.Tensor) -> None:
    tokens, width = x.shape
    hl.specialize(width)
    for tile_m in hl.tile(tokens, block_size=1):
        peak = hl.zeros([tile_m], dtype=torch.float32)
        for tile_n in hl.tile(width):
            peak = torch.maximum(peak, torch.amax(torch.abs(x[tile_m, tile_n].to(torch.float32)), dim=-1))
        s = peak.clamp(min=1e-6) / LIMIT
        scale[tile_m, 0] = s
        for tile_n in hl.tile(width):
            y = x[tile_m, tile_n].to(torch.float32) / s[:, None]
            out[tile_m, tile_n] = y.clamp(-LIMIT, LIMIT).to(out.dtype)
