"""Branches of an `if` on a device value that leave a name with different shapes cannot be selected between
(both branches run on a TPU): refused on the `if`."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[8, 128], flags=i32[8])
@helion.kernel(static_shapes=True)
def if_device_shape_change(x: torch.Tensor, flags: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for r in hl.grid(x.size(0)):
        v = x[r, :]
        if flags[r] > 0:
            v = v.sum()
        out[r, :] = v
    return out


REJECT = r"HPL105.*`v` is float32\[\] after one branch"
