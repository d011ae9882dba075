"""`hl.rand` with a seed argument: random values in [0, 1) added to x. No torch value to compare with, so
the check is the distribution: every value in range, not all equal, mean near 1/2."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[4096], seed=42)
@helion.kernel(static_shapes=True)
def rand_uniform(x: torch.Tensor, seed: int) -> torch.Tensor:
    out = torch.empty_like(x)
    (m,) = x.size()
    for tm in hl.tile(m):
        out[tm] = x[tm] + hl.rand([tm], seed=seed)
    return out


def check(out, x, seed):
    noise = out - x
    if not bool(((noise >= 0) & (noise < 1)).all()):
        return "values outside [0, 1)"
    if noise.std() < 0.2 or abs(float(noise.mean()) - 0.5) > 0.05:
        return f"not uniform: mean {float(noise.mean()):.3f}, std {float(noise.std()):.3f}"
    return None
