"""A state cache read and written back by DMA at rows named per token (`pallas_indirect_access_mode='dma'`), the
way decode kernels update per-request state: the same row named twice in one block (the later token's update
wins, as in torch), again in a later block (it must see the earlier update), and a partial last block."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(24)
    slots = torch.tensor([[3], [7], [1], [7], [0], [5], [2], [6], [3], [4], [1], [9], [8]], dtype=torch.int32)
    return [torch.randn(13, 2, 128, generator=g), slots, torch.randn(10, 2, 128, generator=g)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8], pallas_indirect_access_mode="dma"))
def dma_scatter_state_update(x: torch.Tensor, slots: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for _ in hl.grid(1):
        for t in hl.tile(x.size(0)):
            s = slots[t, 0]
            old = state[s, :, :]
            new = old * 0.5 + x[t, :, :]
            out[t, :, :] = new * 2.0
            state[s, :, :] = new
    return out


def reference(x, slots, state):
    out = torch.empty_like(x)
    for b in range(0, x.shape[0], 8):  # blocks of 8 tokens, in order; within a block all read first
        rows = slots[b:b + 8, 0].long()
        new = state[rows] * 0.5 + x[b:b + 8]
        out[b:b + 8] = new * 2.0
        for i, r in enumerate(rows.tolist()):
            state[r] = new[i]
    return out
