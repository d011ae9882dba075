"""Lane indices `torch.add(hl.arange(128), begin, alpha=2)`: the window starts at twice the loaded start."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.randn(8, 512, generator=torch.Generator().manual_seed(35)), torch.tensor([0, 1], dtype=torch.int32)]


@helion.kernel(static_shapes=True)
def dynamic_window_scaled(table: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
    rows = hl.specialize(table.size(0))
    out = torch.empty([starts.size(0), rows, 128], dtype=table.dtype, device=table.device)
    for t in hl.tile(starts.size(0), block_size=1):
        begin = starts[t.begin] * 128
        lanes = torch.add(hl.arange(128), begin, alpha=2)
        out[t, :, :] = table[:, lanes][None, :, :]
    return out


def reference(table, starts):
    lanes = torch.arange(128)
    return torch.stack([table[:, lanes + 2 * int(s) * 128] for s in starts])
