"""Block rows selected by a named `local.index` and accumulated under an `if` on the live row count."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[8, 2, 128], out=f32[1, 2, 128])
@helion.kernel(static_shapes=True)
def block_rows_under_if(x: torch.Tensor, out: torch.Tensor) -> None:
    tokens = x.size(0)
    for _ in hl.grid(1):
        acc = hl.zeros([2, 128], dtype=torch.float32)
        for outer in hl.tile(tokens, block_size=4):
            blk = x[outer, :, :]
            live = outer.end - outer.begin
            for local in hl.tile(live, block_size=2):
                rows = local.index
                if live >= 2:
                    acc = acc + blk[rows, :, :].float().sum(dim=0)
        out[0, :, :] = acc.to(out.dtype)


def reference(x, out):
    out.copy_(x.sum(0, keepdim=True))
