"""A short causal convolution over tokens: loaded bounds (`hl.load(starts, [r])`), three carried states
shifted every token, one output row per token, the final states as a second output."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(52)
    return [torch.randn(9, 2, 128, generator=g), torch.randn(4, 2, 128, generator=g),
            torch.randn(1, 3, 2, 128, generator=g), torch.tensor([0], dtype=torch.int32),
            torch.tensor([9], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[4]))
def block_short_conv(x: torch.Tensor, weight: torch.Tensor, init: torch.Tensor, starts: torch.Tensor,
                     ends: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    tokens = x.size(0)
    bt = hl.register_block_size(4, tokens)
    out = torch.empty_like(x)
    final = torch.empty_like(init)
    for r in hl.grid(1):
        lo = hl.load(starts, [r])
        hi = hl.load(ends, [r])
        s0 = init[r, 0, :, :]
        s1 = init[r, 1, :, :]
        s2 = init[r, 2, :, :]
        w0 = weight[0, :, :]
        w1 = weight[1, :, :]
        w2 = weight[2, :, :]
        w3 = weight[3, :, :]
        for outer in hl.tile(lo, hi, block_size=bt):
            blk = x[outer, :, :]
            live = outer.end - outer.begin
            for local in hl.tile(live, block_size=1):
                tok = blk[local.begin, :, :]
                out[outer.begin + local.begin, :, :] = s0 * w0 + s1 * w1 + s2 * w2 + tok * w3
                s0 = s1
                s1 = s2
                s2 = tok
        final[r, 0, :, :] = s0
        final[r, 1, :, :] = s1
        final[r, 2, :, :] = s2
    return out, final


def reference(x, weight, init, starts, ends):
    stream = torch.cat((init[0], x), dim=0)
    out = sum(stream[i:i + x.size(0)] * weight[i] for i in range(4))
    return out, x[-3:].unsqueeze(0).clone()


TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}
