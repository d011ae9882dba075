"""Backward pass of RMSNorm, giving d(x) and d(weight) in one sweep over row blocks.

Each row block writes its slice of grad_x and one partial row of grad_weight; the partial rows are
summed on the host after the loop.
"""

import helion
import helion.language as hl
import torch


# helion: args(grad_out=f32[8192, 8192], x=f32[8192, 8192], weight=f32[8192], rstd=f32[8192, 1])
@helion.kernel(static_shapes=True)
def rms_norm_bwd(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.size()
    rows_per_block = hl.register_block_size(m)
    grad_x = torch.empty_like(x)
    grad_w_partial = x.new_empty([helion.cdiv(m, rows_per_block), n], dtype=torch.float32)
    for tile_m in hl.tile(m, block_size=rows_per_block):
        dy = grad_out[tile_m, :].to(torch.float32)
        inv_rms = rstd[tile_m, :]
        x_hat = x[tile_m, :].to(torch.float32) * inv_rms
        dy_w = dy * weight[None, :].to(torch.float32)
        proj = torch.sum(dy_w * x_hat, dim=-1, keepdim=True) / n
        grad_x[tile_m, :] = ((dy_w - x_hat * proj) * inv_rms).to(grad_x.dtype)
        grad_w_partial[tile_m.id, :] = torch.sum(dy * x_hat, dim=0)
    return grad_x, grad_w_partial.sum(0).to(weight.dtype)


def reference(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    x_hat = x * rstd
    dy_w = grad_out * weight
    grad_x = (dy_w - x_hat * (dy_w * x_hat).mean(-1, keepdim=True)) * rstd
    return grad_x, (grad_out * x_hat).sum(0)


SMALL = {"grad_out": "f32[256, 256]", "x": "f32[256, 256]", "weight": "f32[256]", "rstd": "f32[256, 1]"}
