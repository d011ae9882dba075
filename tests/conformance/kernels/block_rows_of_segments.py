"""Rows of a block taken one at a time by `blk[local.begin, :, :]`, where `local` walks the block's live rows
(`hl.tile(outer.end - outer.begin, block_size=1)`) and `outer` walks a segment whose bounds are loaded on the
device: a decaying running sum per segment, written per row. Segments 1..6, 6..6 (empty), 6..13 of 13 rows in
blocks of 4, so blocks start off the block grid and the last block of each segment is partial."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(7)
    return [torch.randn(13, 2, 128, generator=g), torch.tensor([1, 6, 6], dtype=torch.int32),
            torch.tensor([6, 6, 13], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[4]))
def block_rows_of_segments(x: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
    bt = hl.register_block_size(4, x.size(0))
    out = torch.zeros_like(x)
    for s in hl.grid(starts.size(0)):
        acc = hl.zeros([x.size(1), x.size(2)], dtype=torch.float32)
        for outer in hl.tile(starts[s], ends[s], block_size=bt):
            blk = x[outer, :, :]
            live = outer.end - outer.begin
            for local in hl.tile(live, block_size=1):
                acc = 0.5 * acc + blk[local.begin, :, :]
                out[outer.begin + local.begin, :, :] = acc
    return out


def reference(x, starts, ends):
    out = torch.zeros_like(x)
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        acc = torch.zeros(x.shape[1:])
        for i in range(a, b):
            acc = 0.5 * acc + x[i]
            out[i] = acc
    return out


TOLERANCE = {"atol": 1e-5, "rtol": 1e-5}
