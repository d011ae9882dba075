"""`@helion.aot_kernel(...)` (upstream's pretuned kernels) is a kernel like `@helion.kernel`: its tuning keys
(key=, batched=) do not change what it computes."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[40, 384], eps=1e-5)
@helion.aot_kernel(batched=[[0, None], None])
def aot_rms(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        xt = x[tile_m, :]
        out[tile_m, :] = xt * torch.rsqrt(torch.mean(xt * xt, dim=-1) + eps)[:, None]
    return out


def reference(x, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps)
