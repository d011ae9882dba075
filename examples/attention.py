"""Flash attention without a causal mask (online softmax over K/V blocks, base-2 exponentials).

Batch and heads are folded into one leading dimension; the grid tiles (batch*heads, queries) and an
inner loop streams key/value blocks, keeping a running max, denominator and f32 accumulator.
"""

import math

import helion
import helion.language as hl
import torch


# helion: args(q=bf16[8, 32, 8192, 256], k=bf16[8, 32, 8192, 256], v=bf16[8, 32, 8192, 256])
# helion: args(q=bf16[8, 32, 32768, 256], k=bf16[8, 32, 32768, 256], v=bf16[8, 32, 32768, 256])
@helion.kernel(static_shapes=True)
def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    q_len = q.size(-2)
    kv_len = k.size(-2)
    head_dim = hl.specialize(q.size(-1))
    q_flat = q.reshape([-1, q_len, head_dim])
    k_flat = k.reshape([-1, kv_len, head_dim])
    v_flat = v.reshape([-1, kv_len, head_dim])
    out = torch.empty_like(q_flat)
    scale = 1.44269504 / math.sqrt(head_dim)  # 1/sqrt(d) times log2(e), so exp2 can be used
    for tile_bh, tile_q in hl.tile([q_flat.size(0), q_len]):
        row_max = hl.full([tile_bh, tile_q], float("-inf"), dtype=torch.float32)
        row_sum = hl.zeros([tile_bh, tile_q], dtype=torch.float32)
        acc = hl.zeros([tile_bh, tile_q, head_dim], dtype=torch.float32)
        q_blk = q_flat[tile_bh, tile_q, :]
        for tile_kv in hl.tile(kv_len):
            k_blk = k_flat[tile_bh, tile_kv, :]
            scores = hl.dot(q_blk, k_blk.transpose(1, 2), out_dtype=torch.float32) * scale
            new_max = torch.maximum(row_max, torch.amax(scores, -1))
            weights = torch.exp2(scores - new_max[:, :, None])
            rescale = torch.exp2(row_max - new_max)
            row_sum = row_sum * rescale + torch.sum(weights, -1)
            v_blk = v_flat[tile_bh, tile_kv, :]
            acc = hl.dot(weights.to(v_blk.dtype), v_blk, acc=acc * rescale[:, :, None])
            row_max = new_max
        out[tile_bh, tile_q, :] = (acc / row_sum[:, :, None]).to(out.dtype)
    return out.view(q.size())


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    scores = q.float() @ k.float().transpose(-1, -2) / math.sqrt(q.size(-1))
    return (torch.softmax(scores, dim=-1) @ v.float()).to(q.dtype)


SMALL = {"q": "f32[1, 2, 256, 128]", "k": "f32[1, 2, 512, 128]", "v": "f32[1, 2, 512, 128]"}
