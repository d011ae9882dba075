"""Rotary embeddings in vLLM's style (written for helion-ls' tests, not vLLM's code): one grid loop over
tokens and the rotated half of each head, `hl.tile([tokens, half])`, so a head of 64 lanes is read 32 lanes
at a time (a block the TPU cannot tile alone: neither a multiple of 128 lanes nor the whole dim); the pairs
are either the two halves of a head or neighbouring lanes (a trailing dim of 2). The kernels are defined under
a module-level `if` guarded by `has_helion()`, as vLLM guards its own."""

from typing import Any

import torch
from vllm.utils.import_utils import has_helion

HAVE_HELION = has_helion()

if HAVE_HELION:
    import helion.language as hl
    from vllm.kernels.helion.register import register_kernel


def make_cases() -> dict[str, tuple[Any, ...]]:
    cases = {}
    for tokens in (3, 8):
        pos = torch.randint(0, 16, (tokens,), device="cuda", dtype=torch.int64)
        x = torch.randn(tokens, 2 * 64, device="cuda", dtype=torch.float32)
        table = torch.randn(16, 64, device="cuda", dtype=torch.float32)
        cases[f"tokens_{tokens}"] = (pos, x, 64, table)
    return cases


if HAVE_HELION:

    @register_kernel(input_generator=make_cases)
    def halves_rotary(pos: torch.Tensor, x: torch.Tensor, head: int, table: torch.Tensor) -> torch.Tensor:
        tokens = hl.specialize(x.shape[0])
        heads = hl.specialize(x.shape[1] // head)
        half = head // 2
        xs = x.view(tokens, heads, head)
        out = torch.empty_like(xs)
        for tile_t, tile_h in hl.tile([tokens, half]):
            p = pos[tile_t]
            c = table[p, tile_h].unsqueeze(1)
            s = table[p, tile_h + half].unsqueeze(1)
            lo = xs[tile_t, :, tile_h]
            hi = xs[tile_t, :, tile_h + half]
            out[tile_t, :, tile_h] = lo * c - hi * s
            out[tile_t, :, tile_h + half] = hi * c + lo * s
        return out.view_as(x)

    @register_kernel(input_generator=make_cases)
    def pairs_rotary(pos: torch.Tensor, x: torch.Tensor, head: int, table: torch.Tensor) -> torch.Tensor:
        tokens = hl.specialize(x.shape[0])
        heads = hl.specialize(x.shape[1] // head)
        half = head // 2
        xp = x.view(tokens, heads, half, 2)
        out = torch.empty_like(xp)
        for tile_t, tile_h in hl.tile([tokens, half]):
            p = pos[tile_t]
            c = table[p, tile_h].unsqueeze(1)
            s = table[p, tile_h + half].unsqueeze(1)
            even = xp[tile_t, :, tile_h, 0]
            odd = xp[tile_t, :, tile_h, 1]
            out[tile_t, :, tile_h, 0] = even * c - odd * s
            out[tile_t, :, tile_h, 1] = odd * c + even * s
        return out.view_as(x)
