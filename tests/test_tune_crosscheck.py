"""Model vs the TPU compiler: when the two are said to agree or disagree (compiler/tune/crosscheck.py)."""

from __future__ import annotations

import pytest

from compiler.ir.config import Config
from compiler.tune.crosscheck import MAGNITUDE_MARGIN, ORDER_MARGIN, compare
from compiler.tune.store import Trial

LAUNCH = 100e-6
A, B, C = ({"block_sizes": [b]} for b in (256, 128, 64))


def model(config: dict, device: float, launch: float = LAUNCH, bound: str = "vector") -> Trial:
    breakdown = {"launch": launch, "compute": 0.5 * device, "step_overhead": 0.1 * device, "exposed_dma": 0.4 * device}
    return Trial(config, device + launch, "ok", {"breakdown": breakdown, "bound": bound}, "model", 0.0)


def compiler(config: dict, seconds: float | None, method: str = "simulated") -> Trial:
    verdict = "ok" if seconds is not None else "failed"
    metrics = {"method": method} | ({"error": "libtpu rejects it (vmem_oom)"} if seconds is None else {})
    return Trial(config, seconds, verdict, metrics, "schedule", 0.0)


def check(picks: list[tuple[dict, float]], figures: list[Trial], launch: float = 1e-6, bound: str = "vector"):
    return compare([model(c, s, launch, bound) for c, s in picks], {Config(t.config): t for t in figures}, "v6e")


PICKS = [(A, 10e-6), (B, 11e-6), (C, 14e-6)]


def test_agreement_within_both_margins_leaves_out_the_dispatch_overhead():
    found = check(PICKS, [compiler(A, 11e-6), compiler(B, 11.1e-6), compiler(C, 13e-6)])
    assert found.verdict == "agrees" and not found.disagrees
    assert found.ratio == pytest.approx(10e-6 / 11e-6)  # device time: the model's 100 µs dispatch is not compared
    assert found.message().startswith("TPU compiler agrees (3 picks checked")


def test_another_pick_ahead_by_more_than_the_order_margin_is_a_disagreement():
    found = check(PICKS, [compiler(A, 10e-6), compiler(B, 10e-6 * (1 - 2 * ORDER_MARGIN)), compiler(C, 20e-6)])
    assert found.order_disagrees and not found.size_disagrees and found.compiler_pick.config == B
    assert "it ranks bs=[128] first (1.04× faster" in found.message()
    tie = check(PICKS, [compiler(A, 10e-6), compiler(B, 10e-6 * (1 - ORDER_MARGIN / 2))])
    assert not tie.order_disagrees


def test_a_pick_estimated_far_from_the_model_is_a_disagreement():
    slow = check(PICKS, [compiler(A, 10e-6 * (1 + 2 * MAGNITUDE_MARGIN)), compiler(B, 30e-6), compiler(C, 40e-6)])
    assert slow.size_disagrees and not slow.order_disagrees
    assert "its estimate of the pick is 1.50× the model's" in slow.message()
    edge = check(PICKS, [compiler(A, 10e-6 * (1 + MAGNITUDE_MARGIN) * 0.99), compiler(B, 30e-6), compiler(C, 40e-6)])
    assert edge.verdict == "agrees"
    # a pick dominated by the call's dispatch, or bound by the per-step overhead: order only
    figures = [compiler(A, 30e-6), compiler(B, 40e-6), compiler(C, 50e-6)]
    for launch, bound in ((LAUNCH, "vector"), (1e-6, "overhead")):
        small = check(PICKS, figures, launch, bound)
        assert small.verdict == "agrees" and not small.size_disagrees
        assert "order only" in small.message() and "the two differ 3.00×" in small.message()


def test_pending_failed_and_issue_bound_figures():
    pending = check(PICKS, [compiler(A, 10e-6)])
    assert pending.verdict == "pending" and pending.pending == 2
    assert pending.message() == "TPU compiler check: 1/3 estimated"
    failed = check(PICKS, [compiler(A, None), compiler(B, 9e-6), compiler(C, 9e-6)])
    assert failed.verdict == "not comparable" and "vmem_oom" in failed.message()
    # a simulated pick is compared with simulated figures only
    mixed = check(PICKS, [compiler(A, 10e-6), compiler(B, 1e-6, "issue"), compiler(C, 1e-6, "issue")])
    assert mixed.verdict == "agrees" and [c.config for c in mixed.comparable] == [A]


def test_issue_bounds_compare_with_the_models_compute_and_overheads():
    # the model's compute is half its device time here (the rest: per-step overhead and DMA)
    agree = check(PICKS, [compiler(A, 5e-6, "issue"), compiler(B, 5.5e-6, "issue"), compiler(C, 9e-6, "issue")])
    assert agree.verdict == "agrees" and agree.ratio == pytest.approx(1.0)
    assert agree.message().startswith("TPU compiler agrees (compute-issue bounds, no DMA)")
    order = check(PICKS, [compiler(A, 5e-6, "issue"), compiler(B, 4e-6, "issue"), compiler(C, 9e-6, "issue")])
    assert order.order_disagrees and order.message().startswith("TPU compiler disagrees (compute-issue bounds")
    assert compare([], {}, "v6e") is None
