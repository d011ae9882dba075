"""A loaded block read again through a partial inner tile's `.index` (`x_block[local.index]`, 3 rows in
blocks of 2): the masked position would be read; refused."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[4, 2, 128], out=f32[1, 2, 128])
@helion.kernel(static_shapes=True, config=helion.Config(pallas_loop_type="fori_loop"))
def block_partial_index_window(x: torch.Tensor, out: torch.Tensor) -> None:
    for _request in hl.grid(1):
        acc = hl.zeros([2, 128], dtype=torch.float32)
        for outer in hl.tile(3, block_size=4):
            x_block = x[outer, :, :]
            for local in hl.tile(3, block_size=2):
                acc = acc + x_block[local.index, :, :].float().sum(dim=0)
        out[0, :, :] = acc.to(out.dtype)


def inputs():
    rows = torch.tensor([1.0, 2.0, 4.0, 8.0])
    return [rows[:, None, None].expand(4, 2, 128).contiguous(), torch.zeros(1, 2, 128)]


def reference(x, out):
    out[:] = 7.0
    return None


REJECT = r"HPL202"
