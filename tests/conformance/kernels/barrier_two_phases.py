"""`hl.barrier()` between two grid loops: the second reads what the first wrote (each grid loop is its own
pallas_call, run in program order)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[64, 256])
@helion.kernel(static_shapes=True)
def two_phase(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    tmp = torch.empty([m, n], dtype=x.dtype, device=x.device)
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        tmp[tile_m, tile_n] = x[tile_m, tile_n] * 2.0
    hl.barrier()
    for tile_m in hl.tile(m):
        out[tile_m] = torch.sum(tmp[tile_m, :], dim=-1)
    return out


def reference(x):
    return (x * 2.0).sum(-1)
