"""SiLU-gated product over flattened views: stores go through out.view(-1)."""
import helion
import helion.language as hl
import torch


# helion: args(a=bf16[256, 512], b=bf16[256, 512])
@helion.kernel()
def swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a)
    total = a.numel()
    a_flat = a.view(-1)
    b_flat = b.view(-1)
    out_flat = out.view(-1)
    for tile in hl.tile(total):
        a_vals = a_flat[tile].to(torch.float32)
        silu = a_vals * torch.sigmoid(a_vals)
        out_flat[tile] = (silu.to(b.dtype) * b_flat[tile])
    return out


def reference(a, b):
    return torch.nn.functional.silu(a.float()).to(a.dtype) * b

SMALL = {"a": "f32[64, 256]", "b": "f32[64, 256]"}
