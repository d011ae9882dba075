"""vLLM's older way to declare a Helion op (written for helion-ls' tests): a bare `@register_kernel`, then the
input generator registered on the kernel, with string case keys."""

from typing import Any

import helion.language as hl
import torch
from vllm.kernels.helion.register import register_kernel


@register_kernel
def scale_rows(out: torch.Tensor, x: torch.Tensor, scale: torch.Tensor) -> None:
    rows, width = x.shape
    for tile_m, tile_n in hl.tile([rows, width]):
        out[tile_m, tile_n] = x[tile_m, tile_n] * scale[tile_m, None]


@scale_rows.register_input_generator
def cases() -> dict[str, tuple[Any, ...]]:
    found = {}
    for width in [128, 1024]:
        for rows in [8, 32]:
            x = torch.randn(rows, width, device="cuda", dtype=torch.bfloat16)
            found[f"width_{width}_rows_{rows}"] = (torch.empty_like(x), x, torch.rand(rows, device="cuda",
                                                                                    dtype=torch.bfloat16))
    return found
