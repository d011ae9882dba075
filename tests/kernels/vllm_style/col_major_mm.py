"""A block-scaled matmul in vLLM's style (written for helion-ls' tests, not vLLM's code): its input generator
passes the weight transposed (`w.t()`, column-major) and its scales transposed, and the kernel's host code
asserts both layouts, as vLLM's block-scaled matmuls assert `b.stride(0) == 1`."""

from itertools import product
from typing import Any

import helion
import helion.language as hl
import torch
from vllm.kernels.helion.case_key import CaseKey
from vllm.kernels.helion.register import register_kernel

GROUP = 128


def make_cases() -> dict[CaseKey, tuple[Any, ...]]:
    cases = {}
    for rows, (k, n) in product([8, 16], [(256, 256), (256, 512)]):
        x = torch.randn(rows, k, device="cuda").to(torch.bfloat16)
        w = torch.randn(n, k, device="cuda").to(torch.bfloat16).t()
        w_scales = (0.5 + torch.rand(n // GROUP, k // GROUP, device="cuda")).t()
        cases[CaseKey({"rows": rows, "k": k, "n": n})] = (x, w, w_scales)
    return cases


def col_major_reference(x: torch.Tensor, w: torch.Tensor, w_scales: torch.Tensor) -> torch.Tensor:
    full = w_scales.repeat_interleave(GROUP, 0).repeat_interleave(GROUP, 1)
    return (x.float() @ (w.float() * full)).to(torch.bfloat16)


@register_kernel(input_generator=make_cases, helion_settings=helion.Settings(autotune_baseline_fn=col_major_reference))
def col_major_mm(x: torch.Tensor, w: torch.Tensor, w_scales: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    n = w.shape[1]
    hl.specialize(k)
    hl.specialize(n)
    assert x.stride(1) == 1
    assert w.stride(0) == 1
    assert w_scales.stride() == (1, k // GROUP)
    out = torch.empty((m, n), dtype=torch.bfloat16, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], torch.float32)
        for tile_k in hl.tile(k, block_size=GROUP):
            part = hl.dot(x[tile_m, tile_k], w[tile_k, tile_n], out_dtype=torch.float32)
            scale = w_scales[tile_k.begin // GROUP, tile_n.index // GROUP]
            acc = acc + part * scale[None, :]
        out[tile_m, tile_n] = acc.to(torch.bfloat16)
    return out
