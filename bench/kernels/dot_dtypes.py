"""One dot of a whole [M, K] row block and [K, N] column block, in whatever dtype the arguments have
(int8 accumulates in int32): bench/calibrate.py --mxu-dtypes compiles it with libtpu for each chip and dtype
to count the MXU pushes each operand dtype needs.
"""

import helion
import helion.language as hl
import torch


# helion: args(x=bf16[256, 512], y=bf16[512, 256])
@helion.kernel(static_shapes=True)
def dot(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], dtype=torch.int32 if x.dtype == torch.int8 else torch.float32, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        out[tile_m, tile_n] = hl.dot(x[tile_m, :], y[:, tile_n], out_dtype=out.dtype)
    return out


SMALL = {"x": "f32[256, 512]", "y": "f32[512, 256]"}
