"""Matmul with a bias row under a permuted launch grid (`loop_orders=[[1, 0]]`)."""
import helion
import helion.language as hl
import torch


# helion: args(x=bf16[32, 256], y=bf16[256, 256], bias=bf16[1, 256])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16, 128, 128], loop_orders=[[1, 0]]))
def matmul_loop_order(x: torch.Tensor, y: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], device=x.device, dtype=x.dtype)
    for tm, tn in hl.tile([m, n]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(k):
            acc = torch.addmm(acc, x[tm, tk], y[tk, tn])
        out[tm, tn] = (acc + bias[tm, tn]).to(out.dtype)
    return out


def reference(x, y, bias):
    return (x.float() @ y.float() + bias.float()).to(torch.bfloat16)


TOLERANCE = {"atol": 5e-2, "rtol": 2e-2}
