"""An inner loop whose end depends on the outer tile (`hl.tile(0, min(n, tq.end))`) with a causal mask
built from `tile.index`: each row summed through its diagonal."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[256, 256])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[128, 128]))
def causal_row_prefix(x: torch.Tensor) -> torch.Tensor:
    n = x.size(0)
    out = torch.empty([n], dtype=x.dtype, device=x.device)
    for tq in hl.tile(n):
        acc = hl.zeros([tq], dtype=torch.float32)
        for tk in hl.tile(0, min(x.size(1), tq.end)):
            keep = tk.index[None, :] <= tq.index[:, None]
            acc += torch.where(keep, x[tq, tk], 0.0).sum(-1)
        out[tq] = acc.to(out.dtype)
    return out


def reference(x):
    return torch.tril(x).sum(-1)


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}
