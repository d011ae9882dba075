"""A 128-element window of a 1-D bf16 table at a loaded start (`table[begin + hl.arange(128)]`)."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.randn(512, generator=torch.Generator().manual_seed(34)).to(torch.bfloat16),
            torch.tensor([2, 0], dtype=torch.int32)]


@helion.kernel(static_shapes=True)
def dynamic_window_1d(table: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
    out = torch.empty([starts.size(0), 128], dtype=table.dtype, device=table.device)
    for t in hl.tile(starts.size(0), block_size=1):
        begin = starts[t.begin] * 128
        out[t, :] = table[begin + hl.arange(128)][None, :]
    return out


def reference(table, starts):
    return torch.stack([table[int(s) * 128:int(s) * 128 + 128] for s in starts])
