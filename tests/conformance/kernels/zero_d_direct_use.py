"""A 0-d tensor argument used directly in device code (`x[t] * s`) is refused, as upstream Helion refuses it
(HostTensorDirectUsage): it must be read first with `s[()]` or `hl.load(s, [])`."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[16, 128], s=f32[])
@helion.kernel(static_shapes=True)
def zero_d_direct_use(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size()):
        out[t] = x[t] * s
    return out


REJECT = r"HPL101 .*0-d host tensor `s`.*s\[\(\)\]"
