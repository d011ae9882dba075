"""`torch.nn.functional.softmax` and `log_softmax` on whole rows, bf16 in and out."""
import helion
import helion.language as hl
import torch


# helion: args(x=bf16[32, 512])
@helion.kernel(static_shapes=True)
def softmax_functional(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    p = torch.empty_like(x)
    logp = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        row = x[t, :].to(torch.float32)
        p[t, :] = torch.nn.functional.softmax(row, dim=-1).to(x.dtype)
        logp[t, :] = torch.nn.functional.log_softmax(row, dim=-1).to(x.dtype)
    return p, logp


def reference(x):
    return torch.softmax(x.float(), -1).to(x.dtype), torch.log_softmax(x.float(), -1).to(x.dtype)
