"""Numerically stable softmax over the last axis of a [batch, rows, cols] tensor, computed in f32.

The grid tiles batch and rows; each step keeps whole rows so the max and the sum need no loop.
"""

import helion
import helion.language as hl
import torch


# helion: args(x=bf16[64, 2048, 4096])
@helion.kernel(static_shapes=True)
def batch_softmax(x: torch.Tensor) -> torch.Tensor:
    batch, rows, _cols = x.size()
    probs = torch.empty_like(x)
    for tile_b, tile_r in hl.tile([batch, rows]):
        logits = x[tile_b, tile_r, :].to(torch.float32)
        shifted = torch.exp(logits - torch.amax(logits, dim=-1, keepdim=True))
        total = torch.sum(shifted, dim=-1, keepdim=True)
        probs[tile_b, tile_r, :] = (shifted / total).to(probs.dtype)
    return probs


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


SMALL = {"x": "f32[4, 64, 256]"}
