"""`hl.jagged_tile` over packed rows: per-row lengths computed from an offsets vector (`ends - starts`, the
ends read at `tile.index + 1`), values gathered at `starts[:, None] + k.index[None, :]`; positions past a
row's end would read the next row and must be masked."""
import helion
import helion.language as hl
import torch


def inputs():
    lengths = torch.tensor([4, 0, 11, 7, 1, 9, 3, 5], dtype=torch.int32)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int32), torch.cumsum(lengths, 0).to(torch.int32)])
    return [torch.randn(int(offsets[-1]), generator=torch.Generator().manual_seed(73)), offsets]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8, 4]))
def jagged_tile_offsets_gather(values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    rows = offsets.size(0) - 1
    out = torch.zeros([rows], dtype=values.dtype, device=values.device)
    for tr in hl.tile(rows):
        starts = offsets[tr]
        ends = offsets[tr.index + 1]
        total = hl.zeros([tr], dtype=values.dtype)
        for tk in hl.jagged_tile(ends - starts):
            at = starts[:, None] + tk.index[None, :]
            total = total + values[at].sum(dim=1)
        out[tr] = total
    return out


def reference(values, offsets):
    return torch.stack([values[a:b].sum() for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(),
                                                          strict=True)])


TOLERANCE = {"atol": 1e-5, "rtol": 1e-5}
