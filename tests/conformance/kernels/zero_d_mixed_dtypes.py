"""0-d tensors of another dtype than the blocks they meet: torch computes in the block's dtype (a 0-d tensor does
not promote a tensor of its kind: bf16 block * f32 scale is bf16, int16 + int32 offset wraps in int16) and an fp8
scale meets f32; jnp would promote the scalar like an array, so the scalar is cast to the result's dtype."""
import helion
import helion.language as hl
import torch


# helion: args(x=bf16[16, 128], y=i16[16, 128], s=f32[], q=f8e4m3[], k=i32[])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8]))
def zero_d_mixed_dtypes(x: torch.Tensor, y: torch.Tensor, s: torch.Tensor, q: torch.Tensor,
                        k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    scaled = torch.empty_like(x)
    shifted = torch.empty_like(y)
    picked = torch.empty([x.size(0), x.size(1)], dtype=torch.float32, device=x.device)
    for t in hl.tile(x.size(0)):
        scaled[t, :] = x[t, :] * s[()]
        shifted[t, :] = y[t, :] + k[()]
        f = x[t, :].to(torch.float32)
        picked[t, :] = torch.where(f > 0, f * q[()], s[()])
    return scaled, shifted, picked


def inputs():
    x = torch.randn(16, 128).to(torch.bfloat16)
    y = torch.randint(-32768, 32768, (16, 128), dtype=torch.int16)
    return x, y, torch.tensor(1.37), torch.tensor(0.75).to(torch.float8_e4m3fn), torch.tensor(30000, dtype=torch.int32)


def reference(x, y, s, q, k):
    f = x.float()
    return x * s, y + k, torch.where(f > 0, f * q, s)
