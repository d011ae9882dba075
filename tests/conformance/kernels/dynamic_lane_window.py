"""A 128-lane window at a start loaded from a tensor (`table[:, begin + hl.arange(128)]`), one program per
start (block size 1)."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.randn(8, 512, generator=torch.Generator().manual_seed(33)), torch.tensor([3, 0, 2, 1], dtype=torch.int32)]


@helion.kernel(static_shapes=True)
def dynamic_lane_window(table: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
    rows = hl.specialize(table.size(0))
    out = torch.empty([starts.size(0), rows, 128], dtype=table.dtype, device=table.device)
    for t in hl.tile(starts.size(0), block_size=1):
        begin = starts[t.begin] * 128
        out[t, :, :] = table[:, begin + hl.arange(128)][None, :, :]
    return out


def reference(table, starts):
    return torch.stack([table[:, int(s) * 128:int(s) * 128 + 128] for s in starts])
