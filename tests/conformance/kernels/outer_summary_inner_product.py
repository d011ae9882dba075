"""A tensor read whole per row at the outer level (a row-sum summary) and again in blocks inside an inner
loop; both outputs returned."""
import helion
import helion.language as hl
import torch


# helion: args(t=f32[64, 256], x=f32[64, 256])
@helion.kernel(static_shapes=True)
def outer_summary_inner_product(t: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.shape
    out = torch.empty_like(x)
    summary = torch.empty([m], dtype=x.dtype, device=x.device)
    for tm in hl.tile(m):
        summary[tm] = t[tm, :].sum(dim=-1)
        for tk in hl.tile(n):
            out[tm, tk] = t[tm, tk] * x[tm, tk]
    return out, summary


def reference(t, x):
    return t * x, t.sum(-1)


CONFIGS = [None, {"block_sizes": [64, 128]}]
