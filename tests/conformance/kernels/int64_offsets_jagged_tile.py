"""int64 offsets of a jagged batch walked with hl.jagged_tile (lengths computed on the device from them):
per-row maxima over each row's own elements."""
import helion
import helion.language as hl
import torch


def inputs():
    lengths = torch.tensor([3, 1, 7, 2, 5, 4, 6, 8], dtype=torch.long)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(lengths, 0)])
    return [torch.randn(int(offsets[-1]), 16, generator=torch.Generator().manual_seed(5)), offsets]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8, 4]))
def int64_offsets_jagged_tile(values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    rows = offsets.size(0) - 1
    d = values.size(1)
    out = torch.zeros([rows, d], dtype=values.dtype, device=values.device)
    flat = values.view(-1)
    for tb in hl.tile(rows):
        starts = offsets[tb]
        lengths = offsets[tb.index + 1] - starts
        best = hl.full([tb, d], float("-inf"), dtype=torch.float32)
        for tk in hl.jagged_tile(lengths):
            at = (starts[:, None] + tk.index[None, :])[:, :, None] * d + hl.arange(d)[None, None, :]
            chunk = hl.load(flat, [at])
            best = torch.maximum(best, chunk.amax(dim=1))
        out[tb, :] = best
    return out


def reference(values, offsets):
    return torch.stack([values[a:b].amax(0) for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)])
