"""Two sequential grid loops (two pallas_calls), the second reading what the first wrote; a scalar argument; two outputs."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[128, 256], scale=2.0)
@helion.kernel()
def two_loops(x: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.size()
    y = torch.zeros_like(x)
    rows = x.new_empty([m], dtype=torch.float32)
    for tile_m, tile_n in hl.tile([m, n]):
        y[tile_m, tile_n] = torch.relu(x[tile_m, tile_n]) * scale
    for tile_m in hl.tile(m):
        rows[tile_m] = y[tile_m, :].sum(dim=1)
    return y, rows.view(m, 1)


def reference(x, scale):
    y = torch.relu(x) * scale
    return y, y.sum(1, keepdim=True)

SMALL = {"x": "f32[128, 256]", "scale": "2.0"}
