"""The gate's workers for model-evaluator tuning runs (compiler/tune/gate_pool.py): forks of a fork server that
preloaded torch, jax and the gate, each with its own forked eager-reference process; several checks run at
once, in several workers, with the same verdicts a single process gives."""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any

import pytest
from conftest import EXAMPLES

import compiler
from compiler.chips import get_chip
from compiler.tune.correctness import GateCase
from compiler.tune.evaluators import verify
from compiler.tune.gate_pool import GatePool
from compiler.tune.shrink import reduced_args


def worker_state() -> dict[str, Any]:
    """Run in a gate worker: what it has loaded at the start of a task, and how its reference process began."""
    from jax._src import xla_bridge

    from compiler.tune.correctness import reference_process

    return {
        "parent": os.getppid(),
        "imported": all(m in sys.modules for m in ("torch", "jax", "compiler.tune.correctness")),
        "backend": xla_bridge.backends_are_initialized(),
        "reference": type(reference_process()._proc._popen).__module__,
    }


@pytest.fixture()
def pool():
    gate = GatePool(2)
    gate.start()
    yield gate
    gate.shutdown(cancel=True)


def _softmax_cases() -> tuple[GateCase, GateCase]:
    kernel = compiler.load(EXAMPLES / "softmax.py").kernels["softmax"]
    config = {"block_sizes": [256]}
    small = reduced_args(kernel, kernel.shape_sets[1], config, get_chip("v7x"))
    good = GateCase.of(kernel.compile(args=small, config=config))
    assert "axis=1)" in good.module
    bad = dataclasses.replace(good, module=good.module.replace("axis=1)", "axis=0)"))  # the wrong axis
    return good, bad


def test_a_gate_worker_is_a_fork_of_the_preloaded_server_with_a_forked_reference(pool) -> None:
    """The worker's parent is the fork server, not this process; torch, jax and the gate were loaded before
    its first task, jax's backend was not started (so its reference process could be a fork of it)."""
    state = pool.submit(worker_state).result(timeout=300)
    assert state["parent"] != os.getpid()
    assert state["imported"] and not state["backend"]
    assert state["reference"] == "multiprocessing.popen_fork"


def test_two_checks_run_in_two_workers_with_their_own_verdicts(pool) -> None:
    """Submitted together, a good case and a miscompiled one run at once in two workers (each with its own
    reference process) and each gets its own verdict."""
    good, bad = _softmax_cases()
    futures = [pool.submit(verify, good), pool.submit(verify, bad)]
    results = [f.result(timeout=300) for f in futures]
    assert [r.verdict for r in results] == ["ok", "wrong"], [r.message for r in results]
    assert len(pool._pool._processes) == 2
