"""The model against the published measurements it is calibrated or checked against (bench/published.py), and
the calibration that derives constants.py from them (bench/calibrate.py)."""

from __future__ import annotations

import math
import sys
from collections import defaultdict

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))

from calibrate import DEFAULT_PARAMS, compile_point, fit, geomean_error, held_out, separated_pairs, splits  # noqa: E402
from published import TABLES, points  # noqa: E402

from compiler.tune.constants import constants_for  # noqa: E402


@pytest.fixture(scope="module")
def modelled():
    return [compile_point(p, TABLES[p.table].chip) for p in points()]


def test_every_published_point_within_25_percent_and_geomean_within_12(modelled) -> None:
    """Published tables point by point; our own measurements (a sweep across each space) have issue 29's bar."""
    errors = {f"{m.point.table} {m.point.kernel} {m.point.label}": m.error() for m in modelled}
    published = {k: e for k, e in errors.items() if not k.startswith("chip-")}
    assert len(published) >= 29
    assert all(abs(e) <= 0.25 for e in published.values()), published
    assert geomean_error(list(errors.values())) <= 0.12


def _groups(modelled, tables) -> list[list]:
    """Points of one table, kernel and size: the configs a measurement ranks against each other."""
    groups = defaultdict(list)
    for m in modelled:
        if m.point.table in tables:
            groups[(m.point.table, m.point.kernel, m.point.size)].append(m)
    return [g for g in groups.values() if len(g) > 1]


def test_rank_order_right_within_each_size_of_the_published_tables(modelled) -> None:
    published = {k for k in TABLES if not k.startswith("chip-")}
    groups = _groups(modelled, published)
    for group in groups:
        assert sorted(group, key=lambda m: m.seconds) == sorted(group, key=lambda m: m.model())
    assert len(groups) >= 14


PAIRS_ORDERED = 0.95  # issue 29's bar; the model orders 95.1 % of the v5e's separated pairs (2026-12-07, 02:50 UTC)


def test_our_v5e_measurements_within_20_percent_and_ordered(modelled) -> None:
    """Issue 29's bar for the v5e model: within ±20 % of the chip on at least 90 % of the points, and 95 % of the
    pairs the chip separates by more than 3 % in the chip's order. Met since a fori_loop iteration pays for the
    values it carries (2026-12-06: 181 of 198 points within ±20 %, 2649 of 2772 pairs; without that term 178 and
    2630, below both bars once the 24 points of that evening came in), and again since a grid step whose code is
    past the instruction memory reloads it (2026-12-07: 207 of 225, 3609 of 3795; without it 3293 of 3483 of the
    first 216 points, 94.5 %)."""
    chip = [m for m in modelled if m.point.table.startswith("chip-v5e")]
    assert len(chip) >= 14
    within = [abs(m.error()) <= 0.20 for m in chip]
    assert sum(within) >= 0.9 * len(chip), {m.point.label: round(m.error(), 3) for m in chip}
    found = [pair for group in _groups(modelled, {"chip-v5e", "chip-v5e-picks", "chip-v5e-sweep"})
             for pair in separated_pairs(group)]
    pairs, right = len(found), sum(ok for _, _, ok in found)
    # among those it gets wrong: attention [1, 1024, 256] (112.4 ms: its code 0.6 % past the instruction memory,
    # the model's count of it exactly at it), batch_softmax's 8-row blocks, attention's 64- and 128-row blocks
    assert pairs >= 3795 and right >= PAIRS_ORDERED * pairs, (right, pairs)


def test_seed_figures_within_ten_percent(modelled) -> None:
    seed = [m for m in modelled if m.point.table == "seed"]
    assert len(seed) == 3 and all(abs(m.error()) <= 0.10 for m in seed)


def test_small_blocks_cost_the_measured_step_time_not_an_assumed_latency(modelled) -> None:
    # the guide's 128^3 points take ~0.35 µs per K step; the model once charged 0.58 µs (1.7x too slow)
    for m in modelled:
        if m.point.table == "guide" and m.point.config["block_sizes"] == [128, 128, 128] and m.point.size > 1024:
            assert abs(m.error()) < 0.05


def test_v5e_fit_reproduces_constants_py() -> None:
    pts = [compile_point(p, "v5e") for p in points("v5e", "fit")]
    base = constants_for("v5e")
    fitted = fit(pts, base, DEFAULT_PARAMS, "[fit] test")
    for name in ("pipeline_iteration_overhead", "dma_latency", "call_overhead", "dma_efficiency", "mxu_min_rows",
                 "fori_iteration_overhead", "fori_carried_element"):
        assert getattr(fitted, name) == pytest.approx(getattr(base, name), rel=0.02), name
    assert fitted.sources["fori_iteration_overhead"] == "[fit] test"
    # and the fit is what it claims to be: no worse than the constants it started from
    before = geomean_error([m.error(base) for m in pts])
    after = geomean_error([m.error(fitted) for m in pts])
    assert after <= before + 0.005 and math.isfinite(after)


def test_v5e_model_holds_on_points_its_fit_did_not_see() -> None:
    """Issue 41's bars on held-out points: each v5e point judged by constants fitted (calibrate's default
    parameters) to the other four of five folds — within ±20 % on at least 90 %, and 95 % of the pairs the chip
    separates by more than 3 % in its order (2026-12-07: 223 of 245, 4065 of 4263; with the 37 points at new shapes
    and the issue interval, 256 of 282, 4064 of 4274; with a fori_loop's control issued beside its body, 263 of 282,
    4077 of 4274; with a softmax's chain of lane reductions, 263 of 282, 4075 of 4274). Leaving each kernel's shape out
    whole is held by the next test."""
    pts = [compile_point(p, "v5e") for p in points("v5e", "fit")]
    parts = splits(pts, "kfold")
    assert sorted(i for part in parts for i in part) == list(range(len(pts)))  # every point judged, once
    result = held_out(pts, constants_for("v5e"), DEFAULT_PARAMS, "kfold")
    assert result.points == len(pts) >= 245
    assert result.met, result.line()


def test_v5e_model_holds_on_shapes_its_fit_did_not_see() -> None:
    """The same bars with each kernel's shape left out whole (its configs judged by a fit that saw none of them, as a
    user's kernel at a new shape is): 253 of 282 (89.7 %, one short) until a softmax's chain of lane reductions was
    modelled; then 260 of 282 (92.2 %), pairs 4073 of 4274 (95.3 %) — the DMA latency no longer set by softmax's 8-row
    steps against add's (docs/model-accuracy.md)."""
    pts = [compile_point(p, "v5e") for p in points("v5e", "fit")]
    result = held_out(pts, constants_for("v5e"), DEFAULT_PARAMS, "shape")
    assert result.points == len(pts) >= 282
    assert result.met, result.line()
