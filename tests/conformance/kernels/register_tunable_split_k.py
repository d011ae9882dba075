"""`hl.register_tunable("split_k", PowerOfTwoFragment(...))`: the value comes from the config key of that name
(else the fragment's default) and sets the outer K block; the K splits are summed with hl.atomic_add."""
import helion
import helion.language as hl
import torch
from helion.autotuner import PowerOfTwoFragment


# helion: args(x=f32[64, 512], y=f32[512, 128])
@helion.kernel(static_shapes=True)
def split_k_mm(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.zeros([m, n], dtype=torch.float32, device=x.device)
    split_k = hl.register_tunable("split_k", PowerOfTwoFragment(1, 16, 2))
    k_block = helion.next_power_of_2(helion.cdiv(k, split_k))
    for tile_m, tile_n, outer_k in hl.tile([m, n, k], block_size=[None, None, k_block]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for inner_k in hl.tile(outer_k.begin, outer_k.end):
            acc = torch.addmm(acc, x[tile_m, inner_k], y[inner_k, tile_n])
        hl.atomic_add(out, [tile_m, tile_n], acc)
    return out


CONFIGS = [{}, {"split_k": 4}, {"split_k": 1}]


def reference(x, y):
    return x @ y


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}
