"""Jagged flash attention with separate query and key offsets: the running max over padded key rows must
treat them as -inf."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(56)
    return [torch.randn(40, 2, 128, generator=g), torch.randn(50, 2, 128, generator=g),
            torch.randn(50, 2, 128, generator=g), torch.tensor([0, 13, 40], dtype=torch.int32),
            torch.tensor([0, 21, 50], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16, 16]))
def jagged_flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_off: torch.Tensor,
                           kv_off: torch.Tensor) -> torch.Tensor:
    h = hl.specialize(q.size(1))
    d = hl.specialize(q.size(2))
    out = torch.empty_like(q)
    for s in hl.grid(q_off.size(0) - 1):
        q_lo = q_off[s]
        q_hi = q_off[s + 1]
        k_lo = kv_off[s]
        k_hi = kv_off[s + 1]
        for tq in hl.tile(q_lo, q_hi):
            qb = q[tq, :, :].transpose(0, 1) * (d ** -0.5)
            m_i = hl.full([h, tq], float("-inf"), dtype=torch.float32)
            l_i = hl.zeros([h, tq], dtype=torch.float32)
            acc = hl.zeros([h, tq, d], dtype=torch.float32)
            for tk in hl.tile(k_lo, k_hi):
                kb = k[tk, :, :].transpose(0, 1)
                vb = v[tk, :, :].transpose(0, 1)
                qk = torch.bmm(qb, kb.transpose(-2, -1))
                m_new = torch.maximum(m_i, torch.amax(qk, -1))
                p = torch.exp(qk - m_new[:, :, None])
                alpha = torch.exp(m_i - m_new)
                l_i = l_i * alpha + torch.sum(p, -1)
                acc = torch.baddbmm(acc * alpha[:, :, None], p, vb)
                m_i = m_new
            out[tq, :, :] = (acc / l_i[:, :, None]).transpose(0, 1).to(out.dtype)
    return out


def reference(q, k, v, q_off, kv_off):
    out = torch.empty_like(q)
    for s in range(q_off.numel() - 1):
        qa, qb = int(q_off[s]), int(q_off[s + 1])
        ka, kb = int(kv_off[s]), int(kv_off[s + 1])
        attn = torch.nn.functional.scaled_dot_product_attention(
            q[qa:qb].transpose(0, 1), k[ka:kb].transpose(0, 1), v[ka:kb].transpose(0, 1))
        out[qa:qb] = attn.transpose(0, 1)
    return out


TOLERANCE = {"atol": 2e-3, "rtol": 2e-3}
