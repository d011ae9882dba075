"""The analytic TPU model: calibration against the seed's v7x and the published v5e measurements, and the
behaviour it must show."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import EXAMPLES, REPO

import compiler
from compiler.ir.chips import get_chip
from compiler.tune.constants import (
    _CLOCKS,
    CHIP_CONSTANTS,
    CONSTANT_NAMES,
    SEED_PIPELINE,
    SEED_POINTS,
    SEED_UNROLL,
    V7X,
    constants_for,
)
from compiler.tune.evaluators import Problem
from compiler.tune.kernel_space import KernelSpace
from compiler.tune.model import copied_bytes, estimate
from compiler.tune.schedule import roofline

V7X_CHIP = get_chip("v7x")
TOLERANCE = 0.10  # the issue's bound; the fit is much closer (see test_seed_points_within_two_percent)


def _kernel(name: str) -> compiler.Kernel:
    module = compiler.load(EXAMPLES / f"{name}.py")
    return module.kernels[name]


@pytest.fixture(scope="module")
def attention() -> compiler.Kernel:
    return _kernel("attention")


def _tflops(kernel: compiler.Kernel, shape_set: int, config: dict) -> float:
    ck = kernel.compile(shape_set=shape_set, config=config, chip="v7x")
    return estimate(ck.plan, V7X_CHIP).tflops


@pytest.mark.parametrize("point", [p for p in SEED_POINTS if p.tflops], ids=lambda p: p.label)
def test_seed_points_within_tolerance(attention: compiler.Kernel, point) -> None:
    got = _tflops(attention, point.shape_set, point.config)
    assert got == pytest.approx(point.tflops, rel=TOLERANCE)


def test_seed_points_within_two_percent(attention: compiler.Kernel) -> None:
    # two fitted constants (vector rate, loop overlap) and three measurements: the third is a prediction
    errors = {
        p.label: _tflops(attention, p.shape_set, p.config) / p.tflops - 1 for p in SEED_POINTS if p.tflops
    }
    assert all(abs(e) < 0.02 for e in errors.values()), errors


def test_seed_unroll_is_out_of_vmem_at_32k(attention: compiler.Kernel) -> None:
    (point,) = [p for p in SEED_POINTS if p.tflops is None]
    assert attention.compile(shape_set=point.shape_set, config=point.config).vmem.verdict == "out_of_vmem"
    # at 8k the seed ran on a v7x (892 TF/s): the report, held to libtpu within 15 % (bench/vmem_calibration.py),
    # puts it 3 % over the limit (66.0 MiB; libtpu compiles it): an over-estimate near the limit, not more
    at_8k = attention.compile(shape_set=0, config=point.config).vmem
    assert at_8k.total_bytes <= 1.05 * get_chip("v7x").max_vmem_limit_bytes


def test_unroll_beats_emit_pipeline_on_the_same_blocks(attention: compiler.Kernel) -> None:
    for blocks in ([2, 512, 2048], [1, 1024, 1024]):
        unroll = _tflops(attention, 0, {"block_sizes": blocks, "pallas_loop_type": "unroll"})
        pipeline = _tflops(attention, 0, {"block_sizes": blocks, "pallas_loop_type": "emit_pipeline"})
        fori = _tflops(attention, 0, {"block_sizes": blocks, "pallas_loop_type": "fori_loop"})
        assert unroll > fori > pipeline


def test_single_buffered_resident_operands_expose_their_fetch(attention: compiler.Kernel) -> None:
    double = attention.compile(shape_set=0, config=SEED_UNROLL)
    single = attention.compile(shape_set=0, config={**SEED_UNROLL, "pallas_load_buffer_count": [2, 1, 1]})
    e2, e1 = estimate(double.plan, V7X_CHIP), estimate(single.plan, V7X_CHIP)
    assert single.vmem.total_bytes < double.vmem.total_bytes
    assert e1.breakdown["exposed_dma"] > 0 == e2.breakdown["exposed_dma"]
    # 128 head pairs, each exposing one fetch of K and V (2 x [2, 8192, 256] bf16) plus the DMA latency
    per_pair = 2 * 2 * 8192 * 256 * 2 / V7X_CHIP.hbm_bandwidth + V7X.dma_latency
    assert e1.seconds - e2.seconds == pytest.approx(128 * per_pair, rel=0.05)


def test_pipeline_restarts_shrink_with_longer_inner_loops(attention: compiler.Kernel) -> None:
    short = estimate(attention.compile(shape_set=0, config=SEED_PIPELINE).plan, V7X_CHIP)
    long = estimate(attention.compile(shape_set=1, config=SEED_PIPELINE).plan, V7X_CHIP)
    assert (
        short.breakdown["pipeline_restarts"] / short.seconds
        > 2 * long.breakdown["pipeline_restarts"] / long.seconds
    )


@pytest.mark.parametrize(
    ("name", "config", "bound"),
    [
        ("softmax", {"block_sizes": [1024]}, "hbm"),
        ("rms_norm_bwd", {"block_sizes": [64]}, "hbm"),
        ("bmm", {"block_sizes": [1, 1024, 2048, 512], "pallas_loop_type": "unroll"}, "mxu"),
        # 128^3 steps are all step overhead (the JAX matmul guide's 128^3 table: ~0.35 µs per step on v5e)
        ("bmm", {"block_sizes": [1, 128, 128, 128], "pallas_loop_type": "emit_pipeline"}, "overhead"),
        ("batch_softmax", {"block_sizes": [1, 512]}, "vector"),
    ],
)
def test_other_seed_kernels_respect_the_roofline(name: str, config: dict, bound: str) -> None:
    ck = _kernel(name).compile(shape_set=0, config=config, chip="v7x")
    est = estimate(ck.plan, V7X_CHIP)
    assert 0 < est.roofline_fraction <= 1
    assert est.seconds >= est.roofline_seconds
    assert est.bound == bound
    if ck.plan.flops:
        assert est.tflops <= V7X_CHIP.bf16_flops / 1e12
    assert est.gbps <= V7X_CHIP.hbm_bandwidth / 1e9


def test_bigger_softmax_blocks_amortise_step_costs_until_hbm_bound() -> None:
    kernel = _kernel("softmax")
    times = [
        estimate(kernel.compile(shape_set=0, config={"block_sizes": [b]}).plan, V7X_CHIP).seconds
        for b in (16, 64, 256, 1024)
    ]
    assert times[0] > times[1] > times[2]
    assert times[3] == pytest.approx(times[2], rel=0.02)  # both stream at the HBM bandwidth


def test_chips_without_measurements_are_labelled_uncalibrated() -> None:
    assert constants_for("v7x").calibrated and constants_for("v5e").calibrated
    for name in ("v4", "v5p", "v6e"):
        assert not constants_for(name).calibrated
        ck = _kernel("softmax").compile(shape_set=0, config={"block_sizes": [256]}, chip=name)
        est = estimate(ck.plan, get_chip(name))
        assert not est.calibrated and est.to_json()["estimate"] is True


def test_every_constant_of_every_chip_names_its_source() -> None:
    assert set(CHIP_CONSTANTS) == {"v4", "v5e", "v5p", "v6e", "v7x"}
    for chip, c in CHIP_CONSTANTS.items():
        for name in CONSTANT_NAMES:
            source = c.sources.get(name, "")
            assert source.startswith("[") and len(source) > 12, (chip, name, source)
        assert _CLOCKS[chip] == get_chip(chip).clock_hz  # what carried-over vector rates are scaled by
        assert name in c.describe()


def test_breakdown_adds_up_to_the_estimate() -> None:
    cases = [
        ("attention", 0, SEED_PIPELINE),
        ("attention", 0, {**SEED_UNROLL, "pallas_load_buffer_count": [2, 1, 1]}),
        ("bmm", 0, {"block_sizes": [1, 128, 128, 128], "pallas_loop_type": "emit_pipeline"}),
        ("bmm", 0, {"block_sizes": [1, 256, 256, 256], "pallas_loop_type": "fori_loop"}),
        ("softmax", 0, {"block_sizes": [64]}),
    ]
    for name, shape_set, config in cases:
        est = estimate(_kernel(name).compile(shape_set=shape_set, config=config).plan, V7X_CHIP)
        assert sum(est.breakdown.values()) == pytest.approx(est.seconds, rel=1e-12)
        assert est.breakdown["launch"] == V7X.call_overhead > 0


def test_streamed_inner_loop_that_waits_on_its_dma_shows_it_in_the_breakdown(attention: compiler.Kernel) -> None:
    # 16 queries of two heads against streamed [2, 2048, 256] K and V blocks: each iteration computes (its
    # 16-row dots at the MXU's minimum rows per weight load) for well under the ~1.1 µs its 4 MiB fetch takes
    # on v7x, so the wait is exposed inner-loop DMA and the breakdown says so
    config = {"block_sizes": [2, 16, 2048], "pallas_loop_type": "emit_pipeline"}
    est = estimate(attention.compile(shape_set=0, config=config).plan, V7X_CHIP)
    assert est.breakdown["inner_exposed_dma"] > 0.1 * est.seconds
    assert est.bound == "hbm"


MATMUL_SOURCE = """
import helion
import helion.language as hl
import torch

@helion.kernel(static_shapes=True)
def mm(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], dtype=torch.int32 if x.dtype == torch.int8 else torch.float32, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        out[tile_m, tile_n] = hl.dot(x[tile_m, :], y[:, tile_n], out_dtype=out.dtype)
    return out
"""


@pytest.mark.parametrize(("chip", "f32", "int8"), [("v5e", 3.0, 0.5), ("v6e", 3.0, 0.5), ("v7x", 3.0, 1.0)])
def test_mxu_time_depends_on_the_operand_dtype(chip: str, f32: float, int8: float) -> None:
    """An f32 dot at the default dot_precision ("tf32") is three bf16 passes (frontend/dot_precision.py)."""
    kernel = compiler.load(MATMUL_SOURCE).kernels["mm"]
    mxu = {}
    for dtype in ("bf16", "f32", "int8"):
        args = kernel.resolve_args(f"x={dtype}[4096, 4096], y={dtype}[4096, 4096]")
        ck = kernel.compile(args=args, config={"block_sizes": [512, 512]}, chip=chip)
        mxu[dtype] = estimate(ck.plan, get_chip(chip)).work["mxu"]
    assert mxu["f32"] / mxu["bf16"] == pytest.approx(f32, rel=0.02)
    assert mxu["int8"] / mxu["bf16"] == pytest.approx(int8, rel=0.02)


def test_a_tiny_kernel_costs_at_least_the_call_overhead() -> None:
    ck = _kernel("add").compile(args="x=f32[8, 128], y=f32[8, 128]")
    est = estimate(ck.plan, V7X_CHIP)
    assert V7X.call_overhead <= est.seconds < 1.1 * V7X.call_overhead


def test_calls_issued_back_to_back_take_the_kernel_or_the_issue_interval_whichever_is_longer() -> None:
    """On the v5e (2026-12-07) every example the model puts under ~0.1 ms ran at 0.110-0.133 ms a pipelined call
    whatever its bytes or grid steps: a call cannot start before the host issues it. Above that interval the kernel's
    own time counts, with no launch term (the calls overlap their dispatch)."""
    v5e = get_chip("v5e")
    c = constants_for("v5e")
    assert 0.10e-3 <= c.issue_interval <= 0.14e-3
    small = estimate(_kernel("add").compile(args="x=bf16[2048, 2048], y=bf16[2048, 2048]", chip="v5e").plan, v5e)
    kernel_alone = small.seconds - small.breakdown["launch"]
    assert kernel_alone < 0.5 * c.issue_interval  # 25 MB at ~700 GB/s
    assert small.pipelined_seconds == c.issue_interval
    large = estimate(_kernel("add").compile(args="x=bf16[4096, 8192], y=bf16[4096, 8192]", chip="v5e").plan, v5e)
    assert large.pipelined_seconds == large.seconds - large.breakdown["launch"] > c.issue_interval
    # a call waited for alone still pays the launch term on top of its kernel
    assert small.seconds == pytest.approx(kernel_alone + c.call_overhead)


def test_space_prunes_configs_that_do_not_fit_vmem(attention: compiler.Kernel) -> None:
    problem = Problem(attention.source, "attention", attention.shape_sets[1], "v7x")
    space = KernelSpace(problem, attention, attention.config_space(problem.args, "v7x"))
    ok, reason = space.is_valid(compiler.Config(SEED_UNROLL))
    assert not ok and "out of VMEM" in reason and "v7x" in reason
    assert space.is_valid(compiler.Config({**SEED_UNROLL, "pallas_load_buffer_count": [2, 1, 1]})) == (
        False,
        reason,
    )
    assert space.is_valid(compiler.Config(SEED_PIPELINE)) == (True, "")
    # single-buffered resident K/V with a small score block: the libtpu compile confirms it fits (44.6 MiB)
    small = compiler.Config(
        {"block_sizes": [1, 256, 512], "pallas_loop_type": "unroll", "pallas_load_buffer_count": [2, 1, 1]}
    )
    assert space.is_valid(small) == (True, "")


def test_the_schedule_floor_counts_the_bytes_the_block_copies_move() -> None:
    # (128, 2048) row blocks of x stay put along the inner grid axis; y's (2048, 128) blocks are fetched anew at
    # every step, 16 times over in all; the f32 output is written once
    kernel = compiler.load(MATMUL_SOURCE).kernels["mm"]
    args = kernel.resolve_args("x=bf16[2048, 2048], y=bf16[2048, 2048]")
    ck = kernel.compile(args=args, config={"block_sizes": [128, 128]}, chip="v5e")
    chip = get_chip("v5e")
    moved = sum(copied_bytes(call) for call in ck.plan.calls)
    assert moved == estimate(ck.plan, chip).dma_bytes
    assert moved == pytest.approx(2048 * 2048 * 2 * (1 + 16) + 2048 * 2048 * 4, rel=0.01)
    assert moved > 2 * ck.plan.hbm_bytes
    assert roofline(ck.plan, chip.hbm_bandwidth, 1e30) == pytest.approx(moved / chip.hbm_bandwidth)


@pytest.mark.parametrize("chip", ["v5e", "v6e"])
def test_outer_copies_share_hbm_with_a_nested_pipeline(chip: str) -> None:
    # the first inner loop streams x by a nested emit_pipeline, the second reads x and writes out as (128,
    # 16384) blocks the outer pipeline copies: those copies run while the nested pipeline streams, on the same
    # HBM, so the step cannot beat the bytes both move (libtpu's simulation of this config floors at them:
    # 491 µs on v5e; the model said 344 µs when it let the outer copies hide behind the inner ones)
    kernel = compiler.load(Path(__file__).parent / "kernels" / "softmax_two_pass.py").kernels["softmax_two_pass"]
    config = {"block_sizes": [128, 16384], "pallas_loop_type": ["emit_pipeline", "fori_loop"]}
    ck = kernel.compile(args=kernel.resolve_args("x=f32[2048, 16384]"), config=config, chip=chip, emit=False)
    c = get_chip(chip)
    est = estimate(ck.plan, c)
    moved = sum(copied_bytes(call) for call in ck.plan.calls)
    assert moved == pytest.approx(3 * 2048 * 16384 * 4)
    assert est.seconds - est.breakdown["launch"] >= moved / c.hbm_bandwidth
    assert est.bound == "hbm"


@pytest.mark.parametrize(("chip", "low", "high"), [("v6e", 128, 128), ("v5e", 32, 64)])
def test_short_lhs_blocks_cost_the_rows_the_mxu_needs_per_weight_load(chip: str, low: int, high: int) -> None:
    # libtpu schedules a bmm step with 32- or 64-row LHS blocks in about the bundles of 128 rows on v6e (of 54
    # rows on v5e; bmm and matmul in blocks of 8-64 rows on the chip fit 48.7): the MXU loads each weight tile
    # whatever the rows; taller blocks cost their rows
    rows = constants_for(chip).mxu_min_rows
    assert low <= rows <= high
    kernel = _kernel("bmm")
    args = kernel.resolve_args("a=bf16[4, 512, 2048], b=bf16[4, 2048, 2048]")

    def mxu(m: int) -> float:  # MXU seconds of the whole kernel: the same 512 rows of each batch, in m-row blocks
        config = {"block_sizes": [4, m, 2048, 1024], "pallas_loop_type": "unroll"}
        ck = kernel.compile(args=args, config=config, chip=chip, emit=False)
        return estimate(ck.plan, get_chip(chip)).work["mxu"]

    assert mxu(32) == pytest.approx(mxu(256) * rows / 32, rel=1e-6)
    assert mxu(16) == pytest.approx(mxu(256) * rows / 16, rel=1e-6)
    assert mxu(128) == pytest.approx(mxu(256), rel=1e-6)


def test_work_total_is_the_chained_sum_of_every_field() -> None:
    """Work.total (how a region's work is summed) combines every field, in order, as `+` does (a sum; the longest
    chain of lane reductions)."""
    import dataclasses

    from compiler.ir.plan import Work

    n = len(dataclasses.fields(Work))
    works = [Work(*(0.1 * (i + 1) + j for j in range(n))) for i in range(5)]
    chained = Work()
    for w in works:
        chained = chained + w
    assert Work.total(works) == chained
    assert all(getattr(Work.total(works), f.name) != 0 for f in dataclasses.fields(Work))


def test_a_block_of_fewer_rows_than_a_sublane_tile_moves_only_its_rows() -> None:
    """The chip: batch_softmax bf16[64, 2048, 4096] in [32, 8] blocks (8 rows, half a bf16 tile) 3.16 ms, in
    [16, 16] 3.21 ms: the same bytes at the same rate. The model once padded the 8 rows to 16 and doubled them."""
    kernel = _kernel("batch_softmax")
    args = kernel.resolve_args("x=bf16[64, 2048, 4096]")

    def estimated(blocks: list[int]):
        return estimate(kernel.compile(args=args, config={"block_sizes": blocks}, chip="v5e").plan, get_chip("v5e"))

    half, whole = estimated([32, 8]), estimated([16, 16])
    assert half.dma_bytes == whole.dma_bytes == 2 * 64 * 2048 * 4096 * 2
    assert half.seconds == pytest.approx(whole.seconds, rel=0.1)


def test_the_cold_fetch_of_a_single_buffered_pipeline_is_waited_for_once() -> None:
    """The chip: matmul 8192^3 in [512, 128, 8192] blocks, one single-buffered emit_pipeline trip per step, 20.9 ms.
    That trip's fetch is the pipeline's cold start; counting it again as the trip's exposed copy made it 39 ms."""
    kernel = compiler.load(REPO / "bench" / "kernels" / "matmul.py").kernels["matmul"]
    config = {"block_sizes": [512, 128, 8192], "loop_orders": [[1, 0]], "pallas_load_buffer_count": [1, 1],
              "pallas_loop_type": "emit_pipeline"}  # fmt: skip
    ck = kernel.compile(args=kernel.resolve_args("x=bf16[8192, 8192], y=bf16[8192, 8192]"), config=config, chip="v5e")
    est = estimate(ck.plan, get_chip("v5e"))
    assert est.breakdown["inner_exposed_dma"] == 0.0 and est.breakdown["pipeline_restarts"] > 0
    assert est.seconds == pytest.approx(20.85e-3, rel=0.2)


def test_a_fori_loop_iteration_pays_for_the_accumulator_it_carries() -> None:
    # on the v5e (bench/chip/v5e_sweep_c.json) matmul 8192^3 in fori_loops over K blocks of 128: 11.53 ms with a
    # [1024, 1024] f32 accumulator, 11.81 with [512, 512], against ~6.1 at K blocks of 2048: an iteration costs
    # ~1.35 µs and ~0.35 µs beyond its dot, in proportion to the accumulator, not to the loop's trips
    kernel = compiler.load(REPO / "bench" / "kernels" / "matmul.py").kernels["matmul"]
    args = kernel.resolve_args("x=bf16[8192, 8192], y=bf16[8192, 8192]")

    def fori(tile: int, k: int, chip: str = "v5e") -> float:
        config = {"block_sizes": [tile, tile, k], "pallas_loop_type": "fori_loop"}
        ck = kernel.compile(args=args, config=config, chip=chip, emit=False)
        (loop,) = ck.plan.calls[0].inner_loops
        assert loop.carried_elems == tile * tile
        return estimate(ck.plan, get_chip(chip)).seconds

    for tile, measured in ((1024, 11.53e-3), (512, 11.81e-3)):
        assert fori(tile, 128) == pytest.approx(measured, rel=0.12)
    carried = constants_for("v5e").fori_carried_element
    assert 0.5e-12 < carried < 1.5e-12
    # chips no fori_loop was measured on keep their estimates: no carried-value term
    assert constants_for("v7x").fori_carried_element == constants_for("v6e").fori_carried_element == 0.0


def test_a_grid_step_whose_code_is_past_the_instruction_memory_reloads_it() -> None:
    """On the v5e, matmul 8192^3 in [1024, 512, 512] blocks (libtpu: 58,557 bundles) ran at 98 % of the peak and in
    [1024, 1024, 512] (twice the code) 11 % slower: the step's MXU passes at the peak are its code, and past
    65,536 bundles each of the 64 grid steps pays code_reload. Chips whose instruction memory was not measured
    have no such term."""
    kernel = compiler.load(REPO / "bench" / "kernels" / "matmul.py").kernels["matmul"]
    args = "x=bf16[8192, 8192], y=bf16[8192, 8192]"
    c = constants_for("v5e")

    def reload(blocks: list[int], chip: str = "v5e") -> float:
        config = {"block_sizes": blocks, "pallas_loop_type": "unroll"}
        return estimate(kernel.compile(args=args, config=config, chip=chip).plan, get_chip(chip)).breakdown[
            "code_reload"]

    assert reload([1024, 512, 512]) == 0.0
    assert reload([1024, 1024, 512]) == pytest.approx(64 * c.code_reload) and c.code_reload > 5e-6
    assert all(reload([1024, 1024, 512], chip) == 0.0 for chip in ("v4", "v5p", "v6e", "v7x"))


def test_a_step_shorter_than_its_chain_of_lane_reductions_takes_the_chain() -> None:
    """On the v5e, softmax bf16[65536, 2560] in blocks of 8 rows took 3.17-3.20 ms (0.39 µs a step) where its copies
    take ~0.32 µs a step and add's steps of a few KiB ~0.2: a softmax's max across the lanes, then its sum, each
    returns its result a fixed time later, and what follows waits. The model priced it 17-18 % fast without that.
    Reductions along rows (across vregs, not lanes) are no such chain, and unrolled iterations run theirs side by
    side (a chain per iteration, not the sum of them)."""
    def plan(name: str, args: str, config: dict):
        kernel = _kernel(name)
        return kernel.compile(args=kernel.resolve_args(args), config=config, chip="v5e").plan

    softmax = plan("softmax", "x=bf16[65536, 2560]", {"block_sizes": [8]})
    assert softmax.calls[0].outer_work.lane_reductions == 2
    est = estimate(softmax, get_chip("v5e"))
    assert est.pipelined_seconds == pytest.approx(3.18e-3, rel=0.08)
    assert 0.05e-6 < constants_for("v5e").reduction_latency < 0.2e-6
    add = plan("add", "x=bf16[16384, 16384], y=bf16[16384, 16384]", {"block_sizes": [8, 128]})
    assert add.calls[0].outer_work.lane_reductions == 0
    rms = plan("rms_norm_bwd", "grad_out=f32[2048, 2048], x=f32[2048, 2048], weight=f32[2048], rstd=f32[2048, 1]", {})
    assert rms.calls[0].outer_work.lane_reductions == 1  # its sum over rows (dim 0) is no lane reduction
    qkv = ", ".join(f"{n}=bf16[8, 32, 8192, 256]" for n in "qkv")
    for loop_type in ("unroll", "fori_loop"):
        call = plan("attention", qkv, {"block_sizes": [1, 128, 256], "pallas_loop_type": loop_type}).calls[0]
        assert [lp.work.lane_reductions for lp in call.inner_loops] == [2]
