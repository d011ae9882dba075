"""Search strategies on synthetic spaces whose optimum is found here by brute force."""

from __future__ import annotations

import itertools
import math
import threading
import time

import pytest

from compiler.ir.config import Config
from compiler.tune.executors import LocalExecutor
from compiler.tune.search import Dimension, DiscreteSpace, SearchProgress, config_key, search

POW2 = tuple(2**i for i in range(12))  # 1 .. 2048
LOOPS = ("emit_pipeline", "unroll", "fori_loop")
LOOP_COST = {"emit_pipeline": 1.5, "unroll": 0.0, "fori_loop": 3.0}


def to_config(point: dict) -> Config:
    return Config(
        block_sizes=[point["b0"], point["b1"], point["b2"], point["b3"]],
        pallas_loop_type=point["loop"],
        pallas_load_buffer_count=point["buffers"],
    )


def is_valid(config) -> tuple[bool, str]:
    b0, b1, b2, b3 = config["block_sizes"]
    if b0 * b1 > 2**16:
        return False, "out of VMEM"
    if b2 > 4 * b3:
        return False, "b2 too large for b3"
    return True, ""


def cost(config) -> float:
    """A bumpy bowl: coupled dimensions, a categorical choice and a trap near the unroll optimum."""
    l0, l1, l2, l3 = (math.log2(b) for b in config["block_sizes"])
    loop, buffers = config["pallas_loop_type"], config["pallas_load_buffer_count"]
    value = (l0 - 7) ** 2 + (l1 - 5) ** 2 + 0.5 * (l2 - l3) ** 2 + 0.3 * (l3 - 9) ** 2
    value += LOOP_COST[loop] + 0.7 * (buffers - 2) ** 2
    if loop == "unroll" and l0 >= 7:
        value += 2.5  # unrolling big blocks spills: the best unroll config sits at a smaller b0
    return 1e-3 * (1 + value)


def slow_cost(config) -> float:
    time.sleep(0.02)
    return cost(config)


def flaky_cost(config) -> tuple[float | None, dict]:
    if config["pallas_loop_type"] == "fori_loop":
        raise RuntimeError("lowering failed")
    if config["pallas_load_buffer_count"] == 1:
        return None, {"verdict": "wrong"}
    return cost(config), {"tflops": 1.0 / cost(config)}


def big_space() -> DiscreteSpace:
    dims = [Dimension(f"b{i}", POW2) for i in range(4)] + [
        Dimension("loop", LOOPS),
        Dimension("buffers", (1, 2, 3)),
    ]
    return DiscreteSpace(dims, to_config, is_valid)


def small_space() -> DiscreteSpace:
    dims = [
        Dimension("b0", (32, 64, 128, 256)),
        Dimension("b1", (16, 64)),
        Dimension("b2", (256, 512)),
        Dimension("b3", (128, 512)),
        Dimension("loop", LOOPS),
        Dimension("buffers", (1, 2)),
    ]
    return DiscreteSpace(dims, to_config, is_valid)


def brute_force(space: DiscreteSpace):
    valid, reasons = {}, {}
    for values in itertools.product(*(d.values for d in space.dimensions)):
        config = space.to_config(dict(zip((d.name for d in space.dimensions), values, strict=True)))
        ok, reason = space.is_valid(config)
        if ok:
            valid[config_key(config)] = cost(config)
        else:
            reasons[config_key(config)] = reason
    best = min(valid, key=valid.get)
    return best, valid, reasons


@pytest.fixture(scope="module")
def big_optimum():
    best, valid, _ = brute_force(big_space())
    return best, valid[best]


SEED_POINT = {"b0": 512, "b1": 512, "b2": 8, "b3": 8, "loop": "emit_pipeline", "buffers": 1}


# ---- exhaustive ---------------------------------------------------------------------------------------


def test_exhaustive_evaluates_every_valid_config_once():
    space = small_space()
    best, valid, reasons = brute_force(space)
    seen = []

    def record(config):  # inline executor: runs in this thread, so it can keep what it sees
        seen.append(config_key(config))
        return cost(config)

    result = search(space, record)
    assert result.strategy == "exhaustive" and result.stop_reason == "complete"
    assert sorted(seen) == sorted(valid)  # each valid config once, no pruned one
    assert result.pruned == len(reasons)
    assert dict(result.pruned_reasons) == {r: list(reasons.values()).count(r) for r in set(reasons.values())}
    assert config_key(result.best.config) == best and result.best.score == valid[best]
    assert result.best.point["b0"] == result.best.config["block_sizes"][0]


def test_seeds_go_first_and_snap_to_the_nearest_candidate():
    space = small_space()
    order = []
    result = search(
        space,
        lambda c: order.append(c) or cost(c),
        seeds=[{"b0": 100, "b1": 64, "b2": 512, "b3": 512, "loop": "unroll", "buffers": 2}],
    )
    assert order[0]["block_sizes"] == [128, 64, 512, 512]  # 100 snapped to 128
    assert len(result.evaluated) == len(order)
    with pytest.raises(ValueError, match="loop"):
        search(space, cost, seeds=[{**SEED_POINT, "loop": "vectorize"}])
    with pytest.raises(ValueError, match="buffers"):
        search(space, cost, seeds=[{k: v for k, v in SEED_POINT.items() if k != "buffers"}])


def test_points_giving_the_same_config_are_evaluated_once():
    dims = [Dimension("loop", ("unroll", "fori_loop")), Dimension("bufs", (1, 2, 3))]

    def collapse(point):  # buffer counts mean nothing to an unrolled loop
        return {"loop": point["loop"], "bufs": 0 if point["loop"] == "unroll" else point["bufs"]}

    calls = []
    result = search(DiscreteSpace(dims, collapse), lambda c: calls.append(c) or float(c["bufs"]))
    assert len(calls) == len(result.evaluated) == 4


def test_each_point_is_built_into_a_config_once():
    """A pattern search comes back to the same points many times; the space builds each point's config once."""
    built: list[tuple] = []

    def counted(point: dict) -> Config:
        built.append(tuple(point.values()))
        return to_config(point)

    result = search(DiscreteSpace(big_space().dimensions, counted, is_valid), cost, seeds=[SEED_POINT], max_evals=200,
                    seed=1)
    assert len(result.evaluated) == 200
    assert len(built) == len(set(built))


def test_failures_are_kept_but_never_best():
    result = search(small_space(), flaky_cost)
    failed = [r for r in result.evaluated if r.score is None]
    assert {r.info.get("error") for r in failed if r.config["pallas_loop_type"] == "fori_loop"} == {
        "RuntimeError: lowering failed"
    }
    assert any(r.info == {"verdict": "wrong"} for r in failed)
    assert result.best.config["pallas_loop_type"] != "fori_loop"
    assert result.best.score == min(r.score for r in result.evaluated if r.score is not None)
    assert result.best.info["tflops"] == pytest.approx(1.0 / result.best.score)


# ---- pattern search -----------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pattern_search_finds_the_optimum_of_a_large_space(seed, big_optimum):
    space = big_space()
    assert math.prod(len(d.values) for d in space.dimensions) > 100_000
    result = search(space, cost, seeds=[SEED_POINT], max_evals=600, seed=seed)
    assert result.strategy == "pattern"
    assert len(result.evaluated) <= 600
    assert config_key(result.best.config) == big_optimum[0]
    assert result.best.score == big_optimum[1]
    assert result.pruned > 0 and set(result.pruned_reasons) <= {"out of VMEM", "b2 too large for b3"}


def test_pattern_search_is_deterministic_whatever_the_executor(big_optimum):
    def trace(result):
        return [(config_key(r.config), r.score) for r in result.evaluated]

    first = search(big_space(), cost, max_evals=150, seed=7)
    again = search(big_space(), cost, max_evals=150, seed=7)
    with LocalExecutor(2) as pool:  # results come back in any order; the search must not care
        pooled = search(big_space(), cost, max_evals=150, seed=7, executor=pool)
    other = search(big_space(), cost, max_evals=150, seed=8)
    assert trace(first) == trace(again) == trace(pooled)
    assert len(trace(first)) == 150 and first.stop_reason == "max_evals"
    assert first.pruned == pooled.pruned and first.pruned_reasons == pooled.pruned_reasons
    assert trace(other) != trace(first)


def test_pattern_search_stops_when_converged_without_a_budget():
    result = search(big_space(), cost, seeds=[SEED_POINT], seed=3)
    assert result.stop_reason == "converged"
    assert 0 < len(result.evaluated) < 5000


def test_time_budget():
    start = time.monotonic()
    result = search(big_space(), slow_cost, max_seconds=0.5)
    assert result.stop_reason == "time"
    assert time.monotonic() - start < 1.5
    assert 5 <= len(result.evaluated) <= 30


def test_time_budget_cuts_a_batch_on_a_pool():
    with LocalExecutor(2) as pool:
        pool.submit(cost, to_config(SEED_POINT)).result(60)  # start a worker first: time the search only
        start = time.monotonic()
        result = search(big_space(), slow_cost, max_seconds=1.0, executor=pool)
    assert result.stop_reason == "time" and time.monotonic() - start < 3.0


# ---- cancellation and progress ------------------------------------------------------------------------


def test_cancellation_with_an_event():
    stop = threading.Event()
    seen = []

    def on_result(r):
        seen.append(r)
        if len(seen) == 10:
            stop.set()

    result = search(big_space(), cost, should_stop=stop, on_result=on_result, max_evals=500)
    assert result.stop_reason == "cancelled"
    assert len(result.evaluated) == 10 == len(seen)


def test_cancellation_with_a_callable_before_anything_runs():
    result = search(small_space(), cost, should_stop=lambda: True)
    assert result.stop_reason == "cancelled" and result.evaluated == [] and result.best is None


def test_progress_reports(big_optimum):
    events: list[SearchProgress] = []
    result = search(small_space(), cost, progress=events.append, progress_interval=0)
    _, valid, reasons = brute_force(small_space())
    assert len(events) > 3
    assert all(e.total_estimate == len(valid) for e in events)
    counts = [e.evaluated for e in events]
    assert counts == sorted(counts) and counts[-1] == len(result.evaluated) == len(valid)
    scores = [e.best_score for e in events if e.best_score is not None]
    assert scores == sorted(scores, reverse=True)
    last = events[-1]
    assert last.pruned == result.pruned == len(reasons)
    assert last.best_score == result.best.score and last.best_config == result.best.config

    events.clear()
    search(big_space(), cost, max_evals=100, progress=events.append)
    assert events[-1].total_estimate == 100 and events[-1].evaluated == 100

    events.clear()  # bounded only by time: the total is the space's size, from the first report on
    search(big_space(), cost, max_seconds=60, progress=events.append, progress_interval=0,
           should_stop=lambda: len(events) >= 3)
    size = math.prod(len(d.values) for d in big_space().dimensions)
    assert events and all(e.total_estimate == size for e in events)


def test_on_pruned_sees_each_invalid_config_once():
    pruned = []
    result = search(
        small_space(), cost, on_pruned=lambda config, reason: pruned.append((config_key(config), reason))
    )
    assert len(pruned) == len(set(pruned)) == result.pruned
    assert all(not is_valid(Config.parse(key))[0] for key, _ in pruned)
