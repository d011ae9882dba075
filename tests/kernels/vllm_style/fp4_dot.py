"""A kernel declared the way vLLM declares its fp4 ops (written for helion-ls' tests, not vLLM's code): its input
generator makes packed 4-bit floats (`torch.float4_e2m1fn_x2`), a storage type no TPU has."""

from typing import Any

import helion.language as hl
import torch
from vllm.kernels.helion.case_key import CaseKey
from vllm.kernels.helion.register import register_kernel

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def fp4_cases() -> dict[CaseKey, tuple[Any, ...]]:
    cases = {}
    for rows, width in ((128, 64), (256, 128)):
        packed = torch.randint(0, 256, (rows, width), dtype=torch.uint8, device=DEVICE).view(torch.float4_e2m1fn_x2)
        scale = torch.ones(rows, dtype=torch.float32, device=DEVICE)
        cases[CaseKey({"rows": rows, "width": width})] = (packed, scale)
    return cases


@register_kernel(input_generator=fp4_cases)
def fp4_row_sums(packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    rows, width = packed.shape
    out = torch.empty(rows, dtype=torch.float32, device=packed.device)
    for tile_m in hl.tile(rows):
        lo, hi = hl.float4_e2m1fn_x2_to_float32(packed[tile_m, :])
        out[tile_m] = (lo + hi).sum(dim=-1) * scale[tile_m]
    return out
