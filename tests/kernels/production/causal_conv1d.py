"""Decode step of a width-4 depthwise causal conv1d (tpu-inference's state-cache contract, as upstream Helion's
TPU production kernel documents it): each token's three history rows come from the state cache row its request
owns; tokens past `live[0]` are padding (their output is 0 and their cache row is left alone); a request without
initial state starts from zeros. The cache row is rolled (the oldest row out, this token's input in) and written
back. Pinned config and shapes: upstream's (N=512 tokens, 4 heads of 128, width 4, 128-token blocks, indirect DMA).
"""
import helion
import helion.language as hl
import torch

CONV_CONFIG = helion.Config(block_sizes=[128], pallas_loop_type="fori_loop",
                            pallas_load_buffer_count=[2, 1, 1, 1, 1, 1, 1], pallas_indirect_access_mode="dma")


# helion: args(x=bf16[512, 4, 128], weight=bf16[4, 4, 128], cache=bf16[512, 3, 4, 128], bias=bf16[4, 128], slots=i32[512], live=i32[3], has_state=i32[512])
@helion.kernel(static_shapes=True, config=CONV_CONFIG)
def causal_conv1d_decode(x: torch.Tensor, weight: torch.Tensor, cache: torch.Tensor, bias: torch.Tensor,
                         slots: torch.Tensor, live: torch.Tensor, has_state: torch.Tensor):
    out = torch.empty_like(x)
    for _ in hl.grid(1):
        for tt in hl.tile(x.size(0)):
            slot = slots[tt]
            old = cache[slot, :, :, :]
            active = tt.index < live[0]
            use = active & (has_state[tt] != 0)
            hist = torch.where(use[:, None, None, None], old, 0.0)
            xt = x[tt, :, :]
            w = weight[:, :, :].float()
            acc = xt.float() * w[3] + bias[:, :].float()
            acc = acc + hist[:, 0].float() * w[0] + hist[:, 1].float() * w[1] + hist[:, 2].float() * w[2]
            out[tt, :, :] = torch.where(active[:, None, None], acc.to(x.dtype), 0.0)
            rolled = torch.cat([hist[:, 1:], xt[:, None]], dim=1)
            cache[slot, :, :, :] = torch.where(active[:, None, None, None], rolled, old)
    return out, cache


def reference(x, weight, cache, bias, slots, live, has_state):
    rows = slots.long()
    old = cache[rows]
    active = torch.arange(x.shape[0]) < live[0]
    use = active & (has_state != 0)
    hist = torch.where(use[:, None, None, None], old, torch.zeros_like(old))
    window = torch.cat([hist, x[:, None]], dim=1).float()
    out = ((window * weight.float()[None]).sum(1) + bias.float()).to(x.dtype)
    out = torch.where(active[:, None, None], out, torch.zeros_like(out))
    cache[rows] = torch.where(active[:, None, None, None], torch.cat([hist[:, 1:], x[:, None]], dim=1), old)
    return out, cache


def inputs(tokens=32, heads=2, cache_rows=40):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(tokens, heads, 128, generator=g).bfloat16()
    weight = torch.randn(4, heads, 128, generator=g).bfloat16()
    cache = torch.randn(cache_rows, 3, heads, 128, generator=g).bfloat16()
    bias = torch.randn(heads, 128, generator=g).bfloat16()
    slots = torch.randperm(cache_rows, generator=g)[:tokens].to(torch.int32)
    live = torch.tensor([tokens - 5, tokens, tokens], dtype=torch.int32)
    has_state = (torch.arange(tokens) % 5 != 0).to(torch.int32)
    return [x, weight, cache, bias, slots, live, has_state]
