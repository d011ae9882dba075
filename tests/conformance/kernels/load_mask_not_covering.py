"""An `extra_mask` that still lets positions past the tensor's end through: the load is refused (torch would
raise an index error there), not read as garbage."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[16, 100], y=f32[16, 60])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8, 256]))
def concat_wrong_mask(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0), x.size(1) + y.size(1)], dtype=x.dtype, device=x.device)
    for tile0, tile1 in hl.tile(out.size()):
        x_part = hl.load(x, [tile0, tile1], extra_mask=(tile1.index < x.size(1) + 4)[None, :])
        out[tile0, tile1] = x_part
    return out


REJECT = r"HPL105 .*spans"
