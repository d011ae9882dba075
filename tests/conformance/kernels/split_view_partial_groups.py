"""Per-group scaling through a view [T, H / G, G] (see split_view_group_quant) where the group tiles do not divide
the groups (5 groups, blocks of 4): the last block's padding is masked, never read or written."""
import helion
import helion.language as hl
import torch


# helion: args(out=bf16[6, 640], x=f32[6, 640], w=f32[640], scales=f32[6, 5], acc=f32[6, 640], group=128)
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[640, 4]))
def split_view_partial_groups(out: torch.Tensor, x: torch.Tensor, w: torch.Tensor, scales: torch.Tensor,
                              acc: torch.Tensor, group: int) -> None:
    m, h = x.shape
    groups = scales.shape[1]
    for tile_m in hl.tile(m, block_size=2):
        total = hl.zeros([tile_m], dtype=torch.float32)
        for tile_h in hl.tile(h):
            total = total + acc[tile_m, tile_h].sum(dim=-1)
        m_blk = (tile_m.begin + hl.arange(tile_m.block_size))[:, None, None]
        for tile_g, tile_n in hl.tile([groups, group], block_size=[None, group]):
            n_blk = (tile_g.index[:, None] * group + tile_n.index[None, :])[None, :, :]
            mask = (tile_g.index < groups)[None, :, None]
            v = hl.load(x, [m_blk, n_blk], extra_mask=mask) * hl.load(w, [n_blk], extra_mask=mask)
            v = v + hl.load(acc, [m_blk, n_blk], extra_mask=mask) + total[:, None, None]
            s = torch.amax(torch.abs(v), dim=-1) / 100.0
            scales[tile_m, tile_g] = s
            hl.store(out, [m_blk, n_blk], (v / s[:, :, None]).to(out.dtype), extra_mask=mask)
            hl.store(acc, [m_blk, n_blk], v * 2.0, extra_mask=mask)


def reference(out, x, w, scales, acc, group):
    m, h = x.shape
    total = acc.sum(dim=-1)
    v = (x * w + acc + total[:, None]).view(m, h // group, group)
    s = v.abs().amax(dim=-1) / 100.0
    scales.copy_(s)
    out.copy_((v / s[:, :, None]).view(m, h).to(out.dtype))
    acc.copy_((v * 2.0).view(m, h))


TOLERANCE = {"atol": 2e-2, "rtol": 1e-2}
