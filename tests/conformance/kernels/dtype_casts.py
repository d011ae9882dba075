"""Casts between f32, bf16 and int32 inside a tile (`.to(dtype)`), results in three dtypes."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[16, 256])
@helion.kernel(static_shapes=True)
def dtype_casts(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    half = torch.empty(x.size(), dtype=torch.bfloat16, device=x.device)
    whole = torch.empty(x.size(), dtype=torch.int32, device=x.device)
    back = torch.empty_like(x)
    for t in hl.tile(x.size()):
        v = x[t] * 4.0
        half[t] = v.to(torch.bfloat16)
        whole[t] = v.to(torch.int32)
        back[t] = v.to(torch.bfloat16).to(torch.float32) + v.to(torch.int32).to(torch.float32)
    return half, whole, back


def reference(x):
    v = x * 4.0
    return v.to(torch.bfloat16), v.to(torch.int32), v.to(torch.bfloat16).float() + v.to(torch.int32).float()
