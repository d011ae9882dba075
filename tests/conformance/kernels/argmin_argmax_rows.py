"""`torch.argmin` and `torch.argmax` along rows, cast to int32."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[32, 256])
@helion.kernel(static_shapes=True)
def argmin_argmax_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n = x.size(0)
    where_min = torch.empty([n], dtype=torch.int32, device=x.device)
    where_max = torch.empty([n], dtype=torch.int32, device=x.device)
    for t in hl.tile(n):
        where_min[t] = torch.argmin(x[t, :], dim=-1).to(torch.int32)
        where_max[t] = torch.argmax(x[t, :], dim=-1).to(torch.int32)
    return where_min, where_max


def reference(x):
    return x.argmin(-1).to(torch.int32), x.argmax(-1).to(torch.int32)
