"""Per-block partial sums: each launch-grid tile sub-tiles its own rows (`hl.tile(t.begin, t.end)`) and
writes one row at `t.id` of a [blocks, N] output; the block size comes from `hl.register_block_size` and
is pinned."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[64, 128])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16, 8]))
def per_block_partials(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    rows = hl.register_block_size(m)
    out = x.new_empty([(m + rows - 1) // rows, n], dtype=torch.float32)
    for big in hl.tile(m, block_size=rows):
        acc = x.new_zeros([n], dtype=torch.float32)
        for small in hl.tile(big.begin, big.end):
            acc += x[small, :].to(torch.float32).sum(0)
        out[big.id, :] = acc
    return out


def reference(x):
    return x.view(4, 16, 128).sum(1)


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}
