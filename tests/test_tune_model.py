"""The analytic TPU model: calibration against the seed's v7x measurements, and the behaviour it must show."""

from __future__ import annotations

import pytest
from conftest import EXAMPLES

import compiler
from compiler.chips import get_chip
from compiler.tune.constants import SEED_PIPELINE, SEED_POINTS, SEED_UNROLL, V7X, constants_for
from compiler.tune.driver import KernelSpace
from compiler.tune.evaluators import Problem
from compiler.tune.model import estimate

V7X_CHIP = get_chip("v7x")
TOLERANCE = 0.10  # the bound; the fit is much closer (see test_seed_points_within_two_percent)


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
    assert attention.compile(shape_set=0, config=point.config).vmem.verdict != "out_of_vmem"


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


def test_pipeline_bubbles_shrink_with_longer_inner_loops(attention: compiler.Kernel) -> None:
    short = estimate(attention.compile(shape_set=0, config=SEED_PIPELINE).plan, V7X_CHIP)
    long = estimate(attention.compile(shape_set=1, config=SEED_PIPELINE).plan, V7X_CHIP)
    assert (
        short.breakdown["pipeline_bubbles"] / short.seconds
        > 2 * long.breakdown["pipeline_bubbles"] / long.seconds
    )


@pytest.mark.parametrize(
    ("name", "config", "bound"),
    [
        ("softmax", {"block_sizes": [128]}, "hbm"),
        ("rms_norm_bwd", {"block_sizes": [64]}, "hbm"),
        ("bmm", {"block_sizes": [1, 1024, 2048, 512], "pallas_loop_type": "unroll"}, "mxu"),
        ("bmm", {"block_sizes": [1, 128, 128, 128], "pallas_loop_type": "emit_pipeline"}, "hbm"),
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


def test_bigger_softmax_blocks_amortise_step_costs() -> None:
    kernel = _kernel("softmax")
    times = [
        estimate(kernel.compile(shape_set=0, config={"block_sizes": [b]}).plan, V7X_CHIP).seconds
        for b in (64, 256, 1024)
    ]
    assert times[0] > times[1] > times[2]


def test_other_chips_are_labelled_uncalibrated() -> None:
    v5e = get_chip("v5e")
    assert constants_for("v7x", V7X_CHIP.bf16_flops).calibrated
    assert not constants_for("v5e", v5e.bf16_flops).calibrated
    ck = _kernel("softmax").compile(shape_set=0, config={"block_sizes": [256]}, chip="v5e")
    est = estimate(ck.plan, v5e)
    assert not est.calibrated and est.to_json()["estimate"] is True


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
