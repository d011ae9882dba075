"""The ways to write a matmul step: `hl.dot(a, b, acc=acc)`, `acc + a @ b`, `torch.matmul`, and
`hl.dot(..., out_dtype=torch.float32)` on bf16 inputs."""
import helion
import helion.language as hl
import torch


# helion: args(x=bf16[64, 256], y=bf16[256, 128])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[64, 128, 128]))
def matmul_spellings(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], dtype=torch.float32, device=x.device)
    for tm, tn in hl.tile([m, n]):
        a = hl.zeros([tm, tn], dtype=torch.float32)
        b = hl.zeros([tm, tn], dtype=torch.float32)
        c = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(k):
            a = hl.dot(x[tm, tk], y[tk, tn], acc=a)
            b = b + hl.dot(x[tm, tk], y[tk, tn], out_dtype=torch.float32)
            c = c + torch.matmul(x[tm, tk], y[tk, tn]).to(torch.float32)
        out[tm, tn] = a + b + c
    return out


def reference(x, y):
    return 3 * (x.float() @ y.float())


TOLERANCE = {"atol": 0.3, "rtol": 2e-2}
