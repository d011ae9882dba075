"""An `if` on a float argument inside the device loop that assigns a value used after it, with
`hl.register_block_size` accumulators; the else branch."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[64, 128], flag=0.5)
@helion.kernel(static_shapes=True)
def branch_on_scalar_arg_else(x: torch.Tensor, flag: float) -> torch.Tensor:
    n, m = x.shape
    bn = hl.register_block_size(n)
    bm = hl.register_block_size(m)
    out = torch.empty([n], device=x.device, dtype=torch.float32)
    for tn in hl.tile(n, block_size=bn):
        acc = hl.zeros([tn, bm], dtype=torch.float32)
        for tm in hl.tile(m, block_size=bm):
            v = x[tn, tm]
            if flag == 0.0:
                twice = v * 2
                acc += twice + 1
            else:
                acc += v
        out[tn] = torch.sum(acc, dim=1)
    return out


def reference(x, flag):
    return (x * 2 + 1).sum(1) if flag == 0.0 else x.sum(1)


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}
