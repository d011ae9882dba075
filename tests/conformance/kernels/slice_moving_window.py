"""A slice whose start is computed from a tile (`x[tm, 2 * tk.begin : 2 * tk.begin + 2 * block]`, as
upstream's int4 GEMM reads the activations for a block of packed weights): a moving window of constant length,
proven inside the dim by the start's bounds."""
import helion
import helion.language as hl
import torch


# helion: args(a=f32[32, 256], b=f32[128, 128])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[32, 32, 128]))
def pair_rows_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    half, n = b.shape
    out = torch.empty([m, n], dtype=torch.float32, device=a.device)
    block = hl.register_block_size(half)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(half, block_size=block):
            begin = tile_k.begin * 2
            a_pairs = a[tile_m, begin:begin + block * 2]
            b_twice = torch.stack([b[tile_k, tile_n], b[tile_k, tile_n]], dim=1).reshape(block * 2, tile_n.block_size)
            acc = hl.dot(a_pairs, b_twice, acc=acc)
        out[tile_m, tile_n] = acc
    return out


def reference(a, b):
    return a @ b.repeat_interleave(2, dim=0)


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}
