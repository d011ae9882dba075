"""Row softmax in two passes over column blocks (running max and sum, then normalise), upstream style."""
from __future__ import annotations

import helion
import helion.language as hl
import torch


# helion: args(x=f32[4096, 8192])
@helion.kernel
def softmax_passes(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    bm = hl.register_block_size(m)
    bn = hl.register_block_size(n)
    for tile_m in hl.tile(m, block_size=bm):
        run_max = hl.full([tile_m], float("-inf"), dtype=torch.float32)
        run_sum = hl.zeros([tile_m], dtype=torch.float32)
        for tile_n in hl.tile(n, block_size=bn):
            block = x[tile_m, tile_n]
            new_max = torch.maximum(run_max, torch.amax(block, dim=1))
            run_sum = run_sum * torch.exp(run_max - new_max) + torch.exp(block - new_max[:, None]).sum(dim=1)
            run_max = new_max
        for tile_n in hl.tile(n, block_size=bn):
            block = x[tile_m, tile_n]
            out[tile_m, tile_n] = torch.exp(block - run_max[:, None]) / run_sum[:, None]
    return out


def reference(x):
    return torch.softmax(x, dim=1)


SMALL = {"x": "f32[64, 512]"}
