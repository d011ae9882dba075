"""Module-level constants written as expressions, not literals: a dtype, a dtype's limits (`torch.finfo`,
`torch.iinfo`), arithmetic on other constants and a tuple of them, all read by the kernel."""
import helion
import helion.language as hl
import torch

_OUT_DTYPE = torch.bfloat16
_FP8 = torch.float8_e4m3fn
_FP8_MAX = float(torch.finfo(_FP8).max)
_LIMIT = _FP8_MAX / 2 ** 4
_INT8_MAX = int(torch.iinfo(torch.int8).max)
_SCALE = 1.0 / (_INT8_MAX * 2)
_BLOCK = 2 ** 5
_SHIFTS = (_SCALE, -_SCALE * 3)


# helion: args(x=f32[64, 256])
@helion.kernel(static_shapes=True)
def module_constant_expressions(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape, dtype=_OUT_DTYPE, device=x.device)
    for tile_m, tile_n in hl.tile(x.size(), block_size=[_BLOCK, None]):
        v = x[tile_m, tile_n] * _LIMIT
        v = v.clamp(-_FP8_MAX, _FP8_MAX).to(_FP8).to(torch.float32)
        out[tile_m, tile_n] = (v + _SHIFTS[0] + _SHIFTS[1]).to(_OUT_DTYPE)
    return out


def reference(x):
    v = (x * _LIMIT).clamp(-_FP8_MAX, _FP8_MAX).to(_FP8).to(torch.float32)
    return (v + _SHIFTS[0] + _SHIFTS[1]).to(_OUT_DTYPE)


TOLERANCE = {"atol": 1e-2, "rtol": 1e-2}
