"""0-d tensor arguments read in device code (`s[()]`, `hl.load(s, [])`): a clamp bound read in an inner loop,
a bf16 scale, an int offset; each is element 0 of a [1] view, read from SMEM."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[16, 256], bound=f32[], scale=bf16[], shift=i32[])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8, 128]))
def zero_d_scale_args(x: torch.Tensor, bound: torch.Tensor, scale: torch.Tensor,
                      shift: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        s = scale[()].to(torch.float32) + shift[()]
        for tile_n in hl.tile(n):
            v = x[tile_m, tile_n].clamp(max=hl.load(bound, []))
            out[tile_m, tile_n] = v * s
    return out


def inputs():
    x = torch.randn(16, 256)
    return x, torch.tensor(0.5), torch.tensor(1.5, dtype=torch.bfloat16), torch.tensor(2, dtype=torch.int32)


def reference(x, bound, scale, shift):
    return x.clamp(max=bound) * (scale.float() + shift)
