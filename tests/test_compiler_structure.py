"""Kernel structure: loops nested two and three deep under emit_pipeline (the innermost loops are the
pipelines, the loops around them run as fori_loop), and what the plan, hovers and config space say."""

import pytest
import torch
from torch_check import assert_matches_torch, kernel_of, specs_of

torch.manual_seed(0)

MATMUL_BY_COLUMNS = """
    @helion.kernel(dot_precision="ieee")  # f32 to within rounding: the test is of the loop structure
    def mm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        m, k = x.size()
        n = w.size(1)
        out = torch.empty([m, n], dtype=x.dtype, device=x.device)
        for tile_m in hl.tile(m):
            for tile_n in hl.tile(n):
                acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
                for tile_k in hl.tile(k):
                    acc = torch.addmm(acc, x[tile_m, tile_k], w[tile_k, tile_n])
                out[tile_m, tile_n] = acc.to(x.dtype)
        return out
"""


@pytest.mark.parametrize("loop_type", ["emit_pipeline", ["unroll", "emit_pipeline"], ["fori_loop", "unroll"]])
def test_two_levels_of_inner_loop(loop_type):
    x, w = torch.randn(32, 256), torch.randn(256, 256)
    ck = assert_matches_torch(MATMUL_BY_COLUMNS, [x, w], lambda x, w: x @ w,
                              {"block_sizes": [16, 128, 128], "pallas_loop_type": loop_type}, rtol=1e-4, atol=1e-4)
    strategies = [lp.strategy for lp in ck.plan.calls[0].inner_loops]
    if loop_type == "emit_pipeline":
        # the loop around the pipeline runs as a fori_loop, and the plan (hence the hover) says so
        assert strategies == ["fori_loop", "emit_pipeline"]
        assert "pltpu.emit_pipeline(" in ck.source and "jax.lax.fori_loop(0, 2, tile_n_body" in ck.source
        assert [lp.strategy for lp in ck.plan.loops if lp.kind == "inner"] == strategies
        assert not ck.check_lowering()


def test_three_levels_with_an_inner_hl_grid():
    assert_matches_torch("""
        @helion.kernel()
        def weighted(x: torch.Tensor) -> torch.Tensor:
            b, m, n = x.size()
            out = torch.empty([b, m], dtype=x.dtype, device=x.device)
            for tb in hl.tile(b):
                for tm in hl.tile(m):
                    s = hl.zeros([tb, tm], dtype=torch.float32)
                    for i in hl.grid(2):
                        for tn in hl.tile(n):
                            s = s + x[tb, tm, tn].sum(-1) * (i + 1)
                    out[tb, tm] = s
            return out
    """, [torch.randn(8, 256, 256)], lambda x: x.sum(-1) * 3,
        {"block_sizes": [8, 128, 128], "pallas_loop_type": "emit_pipeline"}, rtol=1e-4, atol=1e-4)


def test_config_space_offers_pipelines_for_the_innermost_loops():
    """One `pallas_loop_type` for every inner loop (upstream Helion's Config takes one string): emit_pipeline
    is offered because the innermost loop pipelines; the loop around it then runs as a fori_loop."""
    x, w = torch.randn(32, 256), torch.randn(256, 256)
    kernel = kernel_of(MATMUL_BY_COLUMNS)
    space = kernel.config_space(specs_of(kernel, [x, w]))
    loops = dict(space.dimensions)["pallas_loop_type"]
    assert "emit_pipeline" in loops and not any(name.startswith("pallas_loop_type[") for name, _ in space.dimensions)
    assert all(isinstance(config["pallas_loop_type"], str) for config in space)
