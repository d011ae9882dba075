"""Written the way upstream Helion writes its flex-attention example (no shape lines): the kernel takes the
score and mask functions as arguments, a plain wrapper picks torch's defaults when none is given, and main()
calls it once without a score_mod and once with a lambda."""

from __future__ import annotations

import math
from collections.abc import Callable

import helion
import helion.language as hl
import torch
from helion._testing import DEVICE, run_example
from torch.nn.attention.flex_attention import _create_empty_block_mask, _identity


@helion.kernel(static_shapes=True)
def flex_kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, score_mod: Callable,
                num_blocks: torch.Tensor, indices: torch.Tensor, mask_mod: Callable, sparse_m: int,
                sparse_n: int, scale: float) -> torch.Tensor:
    B, H, M, D = q.size()
    N = k.size(2)
    out = torch.empty_like(q)
    block_m = hl.register_block_size(min(128, sparse_m))
    block_n = hl.register_block_size(min(128, sparse_n))
    for tb, th, tm in hl.tile([B, H, M], block_size=[1, 1, block_m]):
        best = hl.full([tm], float("-inf"), dtype=torch.float32)
        total = hl.zeros([tm], dtype=torch.float32)
        acc = hl.zeros([tm, D], dtype=torch.float32)
        rows = q[tb.begin, th.begin, tm, :]
        b = (tb.begin + hl.arange(tb.block_size))[:, None]
        h = (th.begin + hl.arange(th.block_size))[:, None]
        m = (tm.begin + hl.arange(tm.block_size))[:, None]
        sparse_row = tm.begin // sparse_m
        for blk in hl.tile(num_blocks[tb.begin, th.begin, sparse_row], block_size=1):
            first = indices[tb.begin, th.begin, sparse_row, blk.id]
            last = torch.minimum(first + sparse_n, first.new_full([], N))
            for tn in hl.tile(first, last, block_size=block_n):
                n = (tn.begin + hl.arange(tn.block_size))[None, :]
                s = hl.dot(rows, k[tb.begin, th.begin, tn, :].T) * scale
                s = torch.where(mask_mod(b, h, m, n), score_mod(s, b, h, m, n), float("-inf"))
                top = torch.maximum(best, torch.amax(s, -1))
                p = torch.exp(s - top[:, None])
                fix = torch.exp(best - top)
                total = total * fix + p.sum(-1)
                acc = acc * fix[:, None] + hl.dot(p, v[tb.begin, th.begin, tn, :])
                best = top
        out[tb, th, tm, :] = (acc / total[:, None])[None, None, :, :].to(out.dtype)
    return out


def flex(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, score_mod: Callable | None = None) -> torch.Tensor:
    if score_mod is None:
        score_mod = _identity
    mask = _create_empty_block_mask(q, k)
    return flex_kernel(q, k, v, score_mod, mask.kv_num_blocks, mask.kv_indices, mask.mask_mod,
                       mask.BLOCK_SIZE[0], mask.BLOCK_SIZE[1], 1.0 / math.sqrt(q.size(-1)))


def test(heads: int, n: int, score_mod: Callable | None = None) -> None:
    q, k, v = (torch.randn(1, heads, n, 64, device=DEVICE) for _ in range(3))
    run_example(lambda q, k, v: flex(q, k, v, score_mod), torch.nn.functional.scaled_dot_product_attention,
                (q, k, v))


def main() -> None:
    test(2, 128)
    test(2, 256, lambda score, *_: torch.tanh(score))


if __name__ == "__main__":
    main()
