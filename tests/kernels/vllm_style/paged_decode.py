"""A split-KV paged decode kernel declared the way vLLM declares its MLA decode op (written for helion-ls' tests,
not vLLM's code): queries attend over an 8-bit float KV cache through a page table, each split of the sequence
written with its log-sum-exp. The page table holds page numbers and the lengths are at most the pages' tokens:
inputs drawn at random break that contract, the generator's keep it."""

from itertools import product
from typing import Any

import helion
import helion.language as hl
import torch
from helion._utils import cdiv
from vllm.kernels.helion.case_key import CaseKey
from vllm.kernels.helion.register import register_kernel


def decode_cases() -> dict[CaseKey, tuple[Any, ...]]:
    cases = {}
    for batch, seq_len in product([2], [64]):
        page = 16
        pages = cdiv(seq_len, page)
        q = torch.randn(batch, 8, 576, device="cuda", dtype=torch.bfloat16)
        cache = torch.randn(pages, page, 1, 576, device="cuda", dtype=torch.bfloat16).to(torch.float8_e4m3fn)
        table = torch.arange(pages, device="cuda").flip(0).unsqueeze(0).expand(batch, pages).contiguous()
        lens = torch.full((batch,), seq_len, device="cuda", dtype=torch.int32)
        out = torch.empty((batch, 8, 4, 513), device="cuda", dtype=torch.float32)
        cases[CaseKey({"batch": batch, "seqlen": seq_len})] = (q, cache, out, lens, table, 4, 4, page, 512, 64)
    return cases


def decode_reference(q, cache, out, lens, table, group, splits, page, latent, rope) -> None:
    kv = cache.reshape(-1, cache.shape[-1]).float()
    for b in range(q.shape[0]):
        n = int(lens[b])
        rows = table[b, torch.arange(n) // page] * page + torch.arange(n) % page
        keys = kv[rows].to(q.dtype).float()
        scores = q[b].float() @ keys.T / latent**0.5
        per = cdiv(n, splits)
        for s in range(splits):
            lo, hi = s * per, min(s * per + per, n)
            if hi <= lo:
                continue
            p = torch.exp(scores[:, lo:hi] - scores[:, lo:hi].amax(dim=-1, keepdim=True))
            out[b, :, s, :latent] = (p.bfloat16().float() @ keys[lo:hi, :latent]) / p.sum(dim=-1, keepdim=True)
            out[b, :, s, latent] = torch.logsumexp(scores[:, lo:hi], dim=-1)


@register_kernel(
    mutates_args=["out"],
    input_generator=decode_cases,
    helion_settings=helion.Settings(autotune_baseline_fn=decode_reference),
)
def paged_decode(q: torch.Tensor, cache: torch.Tensor, out: torch.Tensor, lens: torch.Tensor, table: torch.Tensor,
                 group: int, splits: int, page: int, latent: int, rope: int) -> None:
    batch, heads = q.shape[0], q.shape[1]
    latent = hl.specialize(latent)
    rope = hl.specialize(rope)
    group = hl.specialize(group)
    kv = cache.reshape(cache.shape[0] * page, 1, -1)
    scale = 1.0 / latent**0.5
    for b, h, s in hl.tile([batch, cdiv(heads, group), splits], block_size=[1, 1, 1]):
        rows = h.begin * group + hl.arange(group)
        real = rows < heads
        q_lat = hl.load(q, [b.begin, rows, hl.arange(latent)])
        q_rope = hl.load(q, [b.begin, rows, hl.arange(latent, latent + rope)])
        n = lens[b.begin]
        per = cdiv(n, splits)
        lo = per * s.begin
        hi = torch.min(lo + per, n)
        m = hl.zeros([group], dtype=torch.float32) - float("inf")
        total = hl.zeros([group], dtype=torch.float32)
        acc = hl.zeros([group, latent], dtype=torch.float32)
        if hi > lo:
            for blk in hl.tile(lo, hi, block_size=None):
                pos = blk.begin + hl.arange(0, blk.block_size)
                inside = pos < hi
                pages = hl.load(table, [b.begin, pos // page], extra_mask=inside)
                at = pages * page + pos % page
                k_lat = hl.load(kv, [at, 0, hl.arange(latent)], extra_mask=inside[:, None]).to(q.dtype)
                k_rope = hl.load(kv, [at, 0, hl.arange(latent, latent + rope)], extra_mask=inside[:, None]).to(q.dtype)
                scores = hl.dot(q_lat, k_lat.T, out_dtype=torch.float32)
                scores = hl.dot(q_rope, k_rope.T, acc=scores) * scale
                scores = torch.where(inside[None, :], scores, float("-inf"))
                new_m = torch.maximum(torch.amax(scores, dim=-1), m)
                shrink = torch.exp(m - new_m)
                p = torch.exp(scores - new_m[:, None])
                acc = acc * shrink[:, None] + hl.dot(p.to(k_lat.dtype), k_lat, out_dtype=torch.float32)
                total = total * shrink + torch.sum(p, dim=-1)
                m = new_m
        hl.store(out, [b.begin, rows, s.begin, hl.arange(latent)], acc / total[:, None], extra_mask=real[:, None])
        hl.store(out, [b.begin, rows, s.begin, latent], m + torch.log(total), extra_mask=real)
