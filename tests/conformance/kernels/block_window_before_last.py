"""Two rows just before a block's last live row (`blk[live - 3:live - 1]`, bounds on the device, length 2),
kept under `if live > 2`; 11 rows in blocks of 4, last block 3 rows."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[11, 2, 128])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[4]))
def block_window_before_last(x: torch.Tensor) -> torch.Tensor:
    n = x.size(0)
    bt = hl.register_block_size(4, n)
    out = torch.zeros_like(x)
    for _ in hl.grid(1):
        for outer in hl.tile(n, block_size=bt):
            blk = x[outer, :, :]
            live = outer.end - outer.begin
            if live > 2:
                pair = blk[live - 3:live - 1, :, :]
                out[outer.begin, :, :] = pair[0, :, :] * pair[1, :, :]
    return out


def reference(x):
    out = torch.zeros_like(x)
    for b in range(0, x.size(0), 4):
        live = min(4, x.size(0) - b)
        if live > 2:
            out[b] = x[b + live - 3] * x[b + live - 2]
    return out


TOLERANCE = {"atol": 1e-5, "rtol": 1e-5}
