"""RMSNorm forward in bf16 with an f32 statistic output (two outputs, a default scalar argument)."""
import helion
import helion.language as hl
import torch


# helion: args(x=bf16[256, 512], w=bf16[512], eps=1e-5)
@helion.kernel()
def rms_norm_fwd(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-5) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.size()
    out = torch.empty_like(x)
    inv = torch.empty([m, 1], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(m):
        xf = x[tile_m, :].to(torch.float32)
        r = torch.rsqrt(torch.mean(xf * xf, dim=-1, keepdim=True) + eps)
        inv[tile_m, :] = r
        out[tile_m, :] = (xf * r * w[:].to(torch.float32)).to(out.dtype)
    return out, inv


def reference(x, w, eps=1e-5):
    xf = x.float()
    r = torch.rsqrt((xf * xf).mean(-1, keepdim=True) + eps)
    return (xf * r * w.float()).to(x.dtype), r

SMALL = {"x": "f32[256, 512]", "w": "f32[512]", "eps": "1e-5"}
