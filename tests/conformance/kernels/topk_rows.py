"""`torch.topk` over each row (k from an int argument made static with `hl.specialize`): values and int32
positions, two outputs."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[16, 512], k=8)
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8]))
def topk_rows(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    b, _ = x.shape
    k = hl.specialize(k)
    vals = torch.empty([b, k], dtype=x.dtype, device=x.device)
    where = torch.empty([b, k], dtype=torch.int32, device=x.device)
    for tb in hl.tile(b):
        v, i = torch.topk(x[tb, :], k, dim=-1, largest=True)
        vals[tb, :] = v
        where[tb, :] = i.to(torch.int32)
    return vals, where


def reference(x, k):
    v, i = torch.topk(x, k, dim=-1)
    return v, i.to(torch.int32)
