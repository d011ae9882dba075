"""`hl.load` / `hl.store` through an index tile: read three stacked states per row, emit their sum, and
store them back rotated (a ring buffer update)."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(27)
    return [torch.randperm(64, generator=g)[:32].to(torch.int32), torch.randn(64, 3, 4, 128, generator=g)]


@helion.kernel(static_shapes=True)
def hl_load_store_rotate_state(idx: torch.Tensor, table: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    out = torch.empty([idx.size(0), *table.shape[2:]], dtype=table.dtype, device=table.device)
    for _ in hl.grid(1):
        for tb in hl.tile(idx.size(0)):
            sel = hl.load(idx, [tb])
            state = hl.load(table, [sel, slice(None), slice(None), slice(None)])
            s0 = state[:, 0, :, :]
            s1 = state[:, 1, :, :]
            s2 = state[:, 2, :, :]
            out[tb, :, :] = s0 + s1 + s2
            slot = hl.arange(3)[None, :, None, None]
            rotated = torch.where(slot == 0, s1[:, None, :, :], torch.where(slot == 1, s2[:, None, :, :],
                                                                            s0[:, None, :, :]))
            hl.store(table, [sel, slice(None), slice(None), slice(None)], rotated)
    return out, table


def reference(idx, table):
    rows = idx.long()
    state = table[rows].clone()
    table[rows] = torch.stack([state[:, 1], state[:, 2], state[:, 0]], dim=1)
    return state.sum(1), table
