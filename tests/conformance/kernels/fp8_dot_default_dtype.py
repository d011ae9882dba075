"""`hl.dot` of two 8-bit float blocks without `acc=` gives float32 (as in Helion), then an fp8 probability
block times fp8 values accumulates into a float32 `acc` (fp8 attention)."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(22)
    q = (torch.randn(64, 128, generator=g) * 0.5).to(torch.float8_e4m3fn)
    k = (torch.randn(128, 128, generator=g) * 0.5).to(torch.float8_e4m3fn)
    v = (torch.randn(128, 128, generator=g) * 0.5).to(torch.float8_e4m3fn)
    return [q, k, v]


@helion.kernel(static_shapes=True)
def fp8_two_dots(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    m, d = q.shape
    n = k.size(0)
    out = torch.empty([m, d], dtype=torch.float32, device=q.device)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m, d], dtype=torch.float32)
        for tile_n in hl.tile(n):
            s = hl.dot(q[tile_m, :], k[tile_n, :].T)
            p = torch.sigmoid(s).to(v.dtype)
            acc = hl.dot(p, v[tile_n, :], acc=acc)
        out[tile_m, :] = acc
    return out


def reference(q, k, v):
    s = q.float() @ k.float().T
    return torch.sigmoid(s).to(torch.float8_e4m3fn).float() @ v.float()


TOLERANCE = {"atol": 2e-2, "rtol": 2e-2}
