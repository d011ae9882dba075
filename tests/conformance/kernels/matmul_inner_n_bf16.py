"""bf16 matmul with M on the launch grid and N and K as nested inner loops, `acc + torch.matmul(...)`."""
import helion
import helion.language as hl
import torch


# helion: args(a=bf16[64, 128], b=bf16[128, 256])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[32, 128, 128]))
def matmul_inner_n_bf16(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    _, n = b.shape
    out = torch.empty((m, n), dtype=a.dtype, device=a.device)
    for mt in hl.tile(m):
        for nt in hl.tile(n):
            acc = hl.zeros([mt, nt], dtype=torch.float32)
            for kt in hl.tile(k):
                acc = acc + torch.matmul(a[mt, kt], b[kt, nt])
            out[mt, nt] = acc.to(a.dtype)
    return out


def reference(a, b):
    return (a.float() @ b.float()).to(torch.bfloat16)
