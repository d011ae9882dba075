"""`hl.split` / `hl.join` on a head dim viewed as pairs (rope): `x.reshape([..., 2, d/2]).permute(...)` split
into halves, rotated, joined and reshaped back; lowered as lane slices and one concatenate (no 2-wide dim)."""
import helion
import helion.language as hl
import torch


# helion: args(q=bf16[2, 3, 24, 128], cos=f32[2, 24, 128], sin=f32[2, 24, 128])
@helion.kernel(static_shapes=True)
def rope_pairs(q: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    batch, heads, seq, d = q.size()
    half = d // 2
    out = torch.empty_like(q)
    for tile_b, tile_t in hl.tile([batch, seq]):
        c = cos[tile_b, tile_t, :].reshape([tile_b, tile_t, 2, half]).permute(0, 1, 3, 2)
        s = sin[tile_b, tile_t, :].reshape([tile_b, tile_t, 2, half]).permute(0, 1, 3, 2)
        c0, c1 = hl.split(c)
        s0, s1 = hl.split(s)
        pair = q[tile_b, :, tile_t, :].to(torch.float32).reshape([tile_b, heads, tile_t, 2, half]).permute(0, 1, 2, 4, 3)
        x0, x1 = hl.split(pair)
        y0 = x0 * c0[:, None, :, :] - x1 * s0[:, None, :, :]
        y1 = x1 * c1[:, None, :, :] + x0 * s1[:, None, :, :]
        out[tile_b, :, tile_t, :] = hl.join(y0, y1).permute(0, 1, 2, 4, 3).reshape([tile_b, heads, tile_t, d]).to(q.dtype)
    return out


def reference(q, cos, sin):
    half = q.shape[-1] // 2
    qf = q.float()
    rot = torch.cat((-qf[..., half:], qf[..., :half]), dim=-1)
    return (qf * cos[:, None] + rot * sin[:, None]).to(q.dtype)


TOLERANCE = {"atol": 2e-2, "rtol": 2e-2}
