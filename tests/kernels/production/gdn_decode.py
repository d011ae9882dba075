"""One decode step of a gated delta network (tpu-inference's state-cache contract, as upstream Helion's TPU
production kernel documents it): each token's recurrent state [heads, K, V] is the state cache row its request
owns (zeros without initial state); it decays by exp(-exp(a_log) * softplus(g + dt_bias)), takes the delta-rule
update k^T (sigmoid(beta) * (v - k S)) with L2-normalised q and k, is read out by q * scale, and goes back to
its cache row. Tokens past `live[0]` are padding: output 0, cache row left alone. Pinned config and shapes:
upstream's (N=512 tokens, 2 heads, K=V=128, 32-token blocks, indirect DMA): the f32 cache is 64 MiB.
"""
import helion
import helion.language as hl
import torch

GDN_CONFIG = helion.Config(block_sizes=[32], pallas_loop_type="fori_loop",
                           pallas_load_buffer_count=[2, 2, 2, 2, 1, 1, 1, 2, 1, 1, 1],
                           pallas_indirect_access_mode="dma")


# helion: args(q=bf16[512, 2, 128], k=bf16[512, 2, 128], v=bf16[512, 2, 128], g=bf16[512, 2, 128], state=f32[512, 2, 128, 128], slots=i32[512], live=i32[3], beta=bf16[512, 2, 128], a_log=f32[2, 128], dt_bias=f32[2, 128], has_state=i32[512], scale=0.08838834764831845)
@helion.kernel(static_shapes=True, config=GDN_CONFIG)
def gdn_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, state: torch.Tensor,
               slots: torch.Tensor, live: torch.Tensor, beta: torch.Tensor, a_log: torch.Tensor,
               dt_bias: torch.Tensor, has_state: torch.Tensor, scale: float):
    heads, dk = q.size(1), q.size(2)
    dv = v.size(2)
    out = torch.empty_like(v)
    for _ in hl.grid(1):
        for tt in hl.tile(q.size(0)):
            slot = slots[tt]
            old = state[slot, :, :, :]
            active = tt.index < live[0]
            use = active & (has_state[tt] != 0)
            s = torch.where(use[:, None, None, None], old, 0.0)
            qt = q[tt, :, :].float()
            kt = k[tt, :, :].float()
            vt = v[tt, :, :].float()
            gt = g[tt, :, :].float()
            qt = qt * torch.rsqrt(torch.sum(qt * qt, dim=-1, keepdim=True) + 1e-6) * scale
            kt = kt * torch.rsqrt(torch.sum(kt * kt, dim=-1, keepdim=True) + 1e-6)
            x = gt + dt_bias[:, :]
            softplus = torch.where(x > 20.0, x, torch.log1p(torch.exp(x)))
            s = s * torch.exp(-torch.exp(a_log[:, :]) * softplus)[:, :, :, None]
            rows = tt.block_size * heads
            pred = hl.dot(kt.reshape(rows, 1, dk), s.reshape(rows, dk, dv), out_dtype=torch.float32)
            delta = torch.sigmoid(beta[tt, :, :].float()) * (vt - pred.reshape(tt.block_size, heads, dv))
            s = s + kt[:, :, :, None] * delta[:, :, None, :]
            o = hl.dot(qt.reshape(rows, 1, dk), s.reshape(rows, dk, dv), out_dtype=torch.float32)
            out[tt, :, :] = torch.where(active[:, None, None], o.reshape(tt.block_size, heads, dv).to(out.dtype), 0.0)
            state[slot, :, :, :] = torch.where(active[:, None, None, None], s, old)
    return out, state


def reference(q, k, v, g, state, slots, live, beta, a_log, dt_bias, has_state, scale):
    rows = slots.long()
    old = state[rows]
    active = torch.arange(q.shape[0]) < live[0]
    use = active & (has_state != 0)
    s = torch.where(use[:, None, None, None], old, torch.zeros_like(old))
    qf, kf, vf = q.float(), k.float(), v.float()
    qf = qf * torch.rsqrt((qf * qf).sum(-1, keepdim=True) + 1e-6) * scale
    kf = kf * torch.rsqrt((kf * kf).sum(-1, keepdim=True) + 1e-6)
    s = s * torch.exp(-torch.exp(a_log) * torch.nn.functional.softplus(g.float() + dt_bias))[..., None]
    pred = torch.einsum("thk,thkv->thv", kf, s)
    s = s + kf[..., None] * (torch.sigmoid(beta.float()) * (vf - pred))[..., None, :]
    out = torch.einsum("thk,thkv->thv", qf, s).to(v.dtype)
    out = torch.where(active[:, None, None], out, torch.zeros_like(out))
    state[rows] = torch.where(active[:, None, None, None], s, old)
    return out, state


def inputs(tokens=16, heads=2, dim=128, cache_rows=20):
    gen = torch.Generator().manual_seed(5)
    q, k, v, g, beta = (torch.randn(tokens, heads, dim, generator=gen).bfloat16() for _ in range(5))
    state = torch.randn(cache_rows, heads, dim, dim, generator=gen) * 0.1
    slots = torch.randperm(cache_rows, generator=gen)[:tokens].to(torch.int32)
    live = torch.tensor([tokens - 2, tokens, tokens], dtype=torch.int32)
    a_log = torch.randn(heads, 1, generator=gen).expand(heads, dim).contiguous()
    dt_bias = torch.randn(heads, 1, generator=gen).expand(heads, dim).contiguous()
    has_state = (torch.arange(tokens) % 4 != 1).to(torch.int32)
    return [q, k, v, g, state, slots, live, beta, a_log, dt_bias, has_state, dim ** -0.5]
