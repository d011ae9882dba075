"""The schedule evaluator: the TPU compiler's own estimate through libtpu's LLO dumps (skipped without libtpu).

Real compiles only: the loops and trip counts read from the dump must match the plan the compiler built, a
shrunken grid must extrapolate to the full grid's simulation, an abort must end only the worker, and
`helion-pallas tune --evaluator schedule` must work end to end and store what it computed once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import child_pythonpath

import compiler
from compiler.ir.chips import get_chip
from compiler.tpu.libtpu_compile import TpuCompiler, libtpu_available
from compiler.tune import schedule
from compiler.tune.crosscheck import TOP
from compiler.tune.keys import TrialKey, shape_key
from compiler.tune.store import TuningStore

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not libtpu_available(), reason="the TPU compiler's schedule needs libtpu")


def compiled(path: str, kernel: str, args: str, config: dict, chip: str):
    k = compiler.load((REPO / path).read_text()).kernels[kernel]
    return k.compile(args=k.resolve_args(args), config=config, chip=chip)


def test_loops_and_trip_counts_read_from_the_dump_are_the_plans():
    ck = compiled("tests/kernels/matmul.py", "matmul", "x=f32[256, 512], y=f32[512, 256]",
                  {"block_sizes": [128, 128, 128], "pallas_loop_type": "emit_pipeline"}, "v5e")
    (call,) = ck.plan.calls
    (inner,) = call.inner_loops
    with TpuCompiler(timeout=300, schedule="bundles") as worker:
        result = worker.compile(ck.source, ck.entry, ck.arg_structs(), ck.chip, dump_mosaic=False)
    assert result.ok, result.error
    (sched,) = result.schedules
    assert result.cycles == {}  # bundles only: no simulation asked for
    grid_loops = [lp for lp in sched.loops if lp.depth == 1]
    assert len(grid_loops) == 1
    # the grid's steps plus the pipeline's fill and drain iterations
    assert call.grid_steps < sched.grid_trips <= call.grid_steps + 2
    assert [lp.trips for lp in sched.loops if lp.depth == 2] == [inner.trips]
    assert sched.executed == pytest.approx(sched.outside + sched.per_step * sched.grid_trips)
    assert sched.executed_for(call.grid_steps) == pytest.approx(sched.outside + sched.per_step * call.grid_steps)
    assert sched.utilisation["MXU"] > 0.1 and sched.bundles > sched.loops[0].bundles / 2


def test_a_shrunken_grid_extrapolates_to_the_full_simulation():
    ck = compiled("examples/softmax.py", "softmax", "x=f32[4096, 256]", {"block_sizes": [64]}, "v5e")
    assert ck.plan.calls[0].grid == (64,)
    full = schedule.schedule_estimate(ck, budget=10**8)
    shrunk = schedule.schedule_estimate(ck, budget=40_000)
    assert full.method == shrunk.method == "simulated"
    assert full.simulated_steps == {"softmax.1": [64, 64]}  # one run of the whole grid
    (steps,) = shrunk.simulated_steps.values()
    assert len(steps) == 3 and steps[0] < steps[1] < 64 and steps[2] == 64
    assert shrunk.cycles == pytest.approx(full.cycles, rel=0.03)
    assert full.seconds == max(full.cycles / get_chip("v5e").clock_hz, full.roofline)
    # only the pallas_call's grid literal changes
    smaller = schedule.with_grids(ck.source, [(8,)], [(64,)])
    assert [a for a, b in zip(ck.source.splitlines(), smaller.splitlines(), strict=True) if a != b] == [
        "        grid=(64,),"
    ]
    with pytest.raises(ValueError):
        schedule.with_grids(ck.source, [(8,)], [(32,)])


def test_v7x_has_no_simulator_the_estimate_is_the_bundles_issued():
    ck = compiled("examples/softmax.py", "softmax", "x=f32[1024, 256]", {"block_sizes": [64]}, "v7x")
    est = schedule.schedule_estimate(ck)
    assert est.method == "issue" and est.cycles is None
    (per_step,) = est.per_step.values()
    assert per_step > 10
    assert est.executed >= per_step * ck.plan.calls[0].grid_steps
    assert est.seconds >= est.executed / get_chip("v7x").clock_hz
    assert est.utilisation["VPU"] > 0 and est.utilisation["MXU"] == 0


def test_where_the_simulator_aborts_the_estimate_is_the_issue_bound():
    # libtpu 0.0.42.1's simulator fails an LLO_CHECK on this kernel's bf16 unpack (a plain compile does not)
    ck = compiled("tests/kernels/swiglu.py", "swiglu", "a=bf16[256, 512], b=bf16[256, 512]",
                  {"block_sizes": [16384]}, "v6e")
    est = schedule.schedule_estimate(ck)
    assert est.method == "issue" and est.seconds > 0 and est.error is None
    assert "libtpu's simulator aborted" in est.notes[0] and "Check failed" in est.notes[0]


def test_an_abort_or_a_memory_limit_ends_only_the_worker():
    ck = compiled("examples/softmax.py", "softmax", "x=f32[256, 256]", {"block_sizes": [64]}, "v4")
    with TpuCompiler(timeout=300, schedule="cycles") as worker:  # libtpu's simulator aborts the process on v4
        result = worker.compile(ck.source, ck.entry, ck.arg_structs(), ck.chip, dump_mosaic=False)
        assert not result.ok and result.kind == "crash" and result.stage == "worker"
        v5e = compiled("examples/softmax.py", "softmax", "x=f32[256, 256]", {"block_sizes": [64]}, "v5e")
        again = worker.compile(v5e.source, v5e.entry, v5e.arg_structs(), v5e.chip, dump_mosaic=False)
        assert again.ok and again.cycles["softmax.1"] > 0  # a fresh worker took over
    with TpuCompiler(timeout=300, schedule="cycles", memory_limit=2 << 30) as small:
        result = small.compile(v5e.source, v5e.entry, v5e.arg_structs(), v5e.chip, dump_mosaic=False)
    assert result.kind == "crash" and "address space is limited to 2.0 GiB" in result.key_line


def test_tune_with_the_schedule_evaluator_end_to_end_and_stored_once(tmp_path):
    store_path = tmp_path / "tuning.sqlite"
    env = {**os.environ, "PYTHONPATH": child_pythonpath()}
    args = ["--chip", "v6e", "--args", "x=f32[64, 384]", "--store", str(store_path), "--json"]
    run = subprocess.run(
        [sys.executable, "-m", "compiler.cli", "tune", "examples/softmax.py", "--evaluator", "schedule", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout)
    assert out["evaluator"] == "schedule" and out["estimate"] is True
    best = out["best"]
    assert best["evaluator"] == "schedule" and best["correctness"]["verdict"] == "ok"
    assert best["label"] == "TPU compiler estimate"
    kernel = compiler.load((REPO / "examples/softmax.py").read_text()).kernels["softmax"]
    key = TrialKey(kernel.source_hash, shape_key(kernel.resolve_args("x=f32[64, 384]")), "v6e", "schedule")
    with TuningStore(store_path) as store:
        stored = store.trials(key)
    assert len(stored) >= 2 and all(t.verdict == "ok" for t in stored)
    for t in stored:
        assert t.metrics["label"] == "TPU compiler estimate" and t.metrics["method"] == "simulated"
        assert t.metrics["cycles"] > 0 and t.seconds == max(t.metrics["simulated_seconds"], t.metrics["roofline_seconds"])
    assert min(t.seconds for t in stored) == best["seconds"]

    # the model's picks were estimated by the tuning's refine step: the check computes nothing again
    check = subprocess.run(
        [sys.executable, "-m", "compiler.cli", "crosscheck", "examples/softmax.py", *args, "--progress", "jsonl"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )
    assert check.returncode == 0, check.stderr[-2000:]
    verdict = json.loads(check.stdout)
    assert verdict["verdict"] in ("agrees", "disagrees") and len(verdict["checked"]) == min(TOP, 4)
    assert all(c["compiler_seconds"] for c in verdict["checked"])
    events = [json.loads(line) for line in check.stderr.splitlines() if line.startswith("{")]
    assert events[-1]["total"] == 0
    with TuningStore(store_path) as store:
        assert len(store.trials(key)) == len(stored)
