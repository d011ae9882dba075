"""LayerNorm forward with a scalar eps argument and broadcast weight/bias."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[128, 256], weight=f32[256], bias=f32[256], eps=1e-5)
@helion.kernel
def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        acc = x[tile_m, :].to(torch.float32)
        mean = torch.mean(acc, dim=-1, keepdim=True)
        centered = acc - mean
        var = torch.mean(centered * centered, dim=-1, keepdim=True)
        normalized = centered * torch.rsqrt(var + eps)
        out[tile_m, :] = (normalized * weight[None, :].to(torch.float32) + bias[None, :].to(torch.float32)).to(out.dtype)
    return out


def reference(x, weight, bias, eps=1e-5):
    return torch.nn.functional.layer_norm(x, [x.size(1)], weight, bias, eps)

SMALL = {"x": "f32[128, 256]", "weight": "f32[256]", "bias": "f32[256]", "eps": "1e-5"}
