"""A static per-group scaled cast in vLLM's style (written for helion-ls' tests, not vLLM's code): one grid
loop over (row groups, column groups, rows in a group, columns in a group), with the scale read at two index
tensors, `scale[g[:, None], h[None, :]]`, and the data read and written at two broadcast index tensors of four
dims, `x[rows[:, None, :, None], cols[None, :, None, :]]` (torch's advanced indexing: several tensors in one
subscript broadcast together)."""

from itertools import product
from typing import Any

import helion.language as hl
import torch
from vllm.kernels.helion.register import register_kernel


def make_cases() -> dict[str, tuple[Any, ...]]:
    cases = {}
    for tokens, width, (gm, gn) in product([4, 16], [256], [(-1, -1), (1, -1), (-1, 1)]):
        x = torch.randn(tokens, width, device="cuda", dtype=torch.float32)
        rows = tokens if gm == -1 else gm
        cols = width if gn == -1 else gn
        scale = torch.rand(tokens // rows, width // cols, device="cuda", dtype=torch.float32) + 0.5
        out = torch.empty(tokens, width, device="cuda", dtype=torch.bfloat16)
        cases[f"tokens_{tokens}_width_{width}_gm_{gm}_gn_{gn}"] = (out, x, scale, rows, cols)
    return cases


@register_kernel(mutates_args=["out"], input_generator=make_cases)
def group_scaled_cast(out: torch.Tensor, x: torch.Tensor, scale: torch.Tensor, rows: int, cols: int) -> None:
    groups_m, groups_n = scale.shape
    hl.specialize(cols)
    for tg, th, tr, tc in hl.tile([groups_m, groups_n, rows, cols]):
        r = tg.index[:, None] * rows + tr.index[None, :]
        c = th.index[:, None] * cols + tc.index[None, :]
        s = hl.load(scale, [tg.index[:, None], th.index[None, :]])
        v = hl.load(x, [r[:, None, :, None], c[None, :, None, :]])
        hl.store(out, [r[:, None, :, None], c[None, :, None, :]], (v / s[:, :, None, None]).to(out.dtype))
