"""The matmuls of the JAX Pallas TPU matmul guide (docs/pallas/tpu/matmul), as Helion kernels.

The guide's kernels tile M and N on the grid and accumulate over K blocks into an f32 accumulator before
writing the bf16 result; these do the same with an inner `hl.tile` over K. With
`pallas_loop_type="emit_pipeline"` the generated code streams the same (bm, bk) and (bk, bn) blocks per K
step; bench/model_vs_published.py and bench/tpu_measure.py compile them at the guide's block sizes.
"""

import helion
import helion.language as hl
import torch


# helion: args(x=bf16[4096, 4096], y=bf16[4096, 4096])
@helion.kernel(static_shapes=True)
def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = acc.to(out.dtype)
    return out


# helion: args(x=bf16[4096, 4096], y=bf16[4096, 4096])
@helion.kernel(static_shapes=True)
def matmul_rhs_t(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """x @ y.T with y stored [N, K] (the guide's fused right-hand-side transpose)."""
    m, k = x.size()
    n, _ = y.size()
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_n, tile_k].T)
        out[tile_m, tile_n] = acc.to(out.dtype)
    return out


# helion: args(x=bf16[4096, 4096], y=bf16[4096, 4096])
@helion.kernel(static_shapes=True)
def matmul_relu(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """relu(x @ y) with the activation applied to the f32 accumulator (the guide's fused activation)."""
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = torch.relu(acc).to(out.dtype)
    return out


SMALL = {"x": "f32[256, 256]", "y": "f32[256, 256]"}  # square: fits all three (check one kernel at a time, -k)
