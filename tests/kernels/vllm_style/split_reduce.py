"""The second half of a split-KV decode, declared the way vLLM declares its MLA decode ops (written for helion-ls'
tests, not vLLM's code): each (sequence, head) merges its splits' partial outputs by their log-sum-exp. One grid
step per (sequence, head): 1,056 steps of 4 splits, more than TPU interpret mode runs in reasonable time."""

from typing import Any

import helion
import helion.language as hl
import torch
from vllm.kernels.helion.case_key import CaseKey
from vllm.kernels.helion.register import register_kernel


def reduce_cases() -> dict[CaseKey, tuple[Any, ...]]:
    cases = {}
    for batch, heads in ((33, 32),):
        partial = torch.randn(batch, heads, 4, 129, device="cuda", dtype=torch.float32)
        out = torch.empty(batch, heads, 128, device="cuda", dtype=torch.float32)
        lse = torch.empty(batch, heads, device="cuda", dtype=torch.float32)
        cases[CaseKey({"batch": batch, "heads": heads})] = (partial, out, lse, 4, 128)
    return cases


def reduce_reference(partial, out, lse, splits, width) -> None:
    weights = torch.softmax(partial[..., width], dim=-1)
    out.copy_((weights[..., None] * partial[..., :width]).sum(dim=2))
    lse.copy_(torch.logsumexp(partial[..., width], dim=-1))


@register_kernel(
    mutates_args=["out", "lse"],
    input_generator=reduce_cases,
    helion_settings=helion.Settings(autotune_baseline_fn=reduce_reference),
)
def split_reduce(partial: torch.Tensor, out: torch.Tensor, lse: torch.Tensor, splits: int, width: int) -> None:
    width = hl.specialize(width)
    splits = hl.specialize(splits)
    for b, h in hl.tile([partial.shape[0], partial.shape[1]], block_size=[1, 1]):
        total = hl.zeros([])
        best = hl.full([], -float("inf"))
        acc = hl.zeros([width], dtype=torch.float32)
        for s in hl.tile(splits, block_size=1):
            values = hl.load(partial, [b.begin, h.begin, s.begin, hl.arange(width)])
            logit = hl.load(partial, [b.begin, h.begin, s.begin, width])
            new_best = torch.maximum(logit, best)
            shrink = torch.exp(best - new_best)
            grow = torch.exp(logit - new_best)
            acc = acc * shrink + grow * values
            total = total * shrink + grow
            best = new_best
        hl.store(out, [b.begin, h.begin, hl.arange(width)], acc / total)
        hl.store(lse, [b.begin, h.begin], best + torch.log(total))
