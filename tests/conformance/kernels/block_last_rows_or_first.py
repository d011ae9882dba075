"""A fixed-length window at the end of a block's live rows (`blk[live - 2:live]`), taken under `if live >= 2`,
and the block's first row otherwise; 9 rows in blocks of 4, so the last block has one live row."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[9, 8, 128])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[4]))
def block_last_rows_or_first(x: torch.Tensor) -> torch.Tensor:
    n = x.size(0)
    bt = hl.register_block_size(4, n)
    out = torch.empty([1, x.size(1), x.size(2)], dtype=x.dtype, device=x.device)
    for g in hl.grid(1):
        acc = hl.zeros([x.size(1), x.size(2)], dtype=torch.float32)
        for outer in hl.tile(n, block_size=bt):
            blk = x[outer, :, :]
            live = outer.end - outer.begin
            if live >= 2:
                acc = acc + blk[live - 2:live, :, :].sum(dim=0)
            else:
                acc = acc + 10.0 * blk[0:1, :, :].sum(dim=0)
        out[g, :, :] = acc
    return out


def reference(x):
    return (x[2:4].sum(0) + x[6:8].sum(0) + 10.0 * x[8]).unsqueeze(0)


TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}
