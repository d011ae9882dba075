"""An inner loop with a constant, unaligned begin (`hl.tile(3, 128, block_size=16)`) summing a 3-D slab
into one scalar per program."""
import helion
import helion.language as hl
import torch


# helion: args(data=f32[128, 8, 128], offsets=i32[2])
@helion.kernel(static_shapes=True)
def constant_begin_sum(data: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    b = offsets.size(0) - 1
    out = torch.zeros([b], dtype=data.dtype, device=data.device)
    for seg in hl.grid(b):
        acc = hl.zeros([1], dtype=data.dtype)
        for t in hl.tile(3, 128, block_size=16):
            acc = acc + data[t, :, :].sum(dim=0).sum(dim=0).sum(dim=0).unsqueeze(0)
        out[seg] = acc.squeeze(0)
    return out


def reference(data, offsets):
    return data[3:128].sum().reshape(1)


TOLERANCE = {"atol": 1e-2, "rtol": 1e-3}
