"""Executors: inline, a local spawn pool and a real Ray cluster on this machine (one for the module)."""

from __future__ import annotations

import concurrent.futures as cf
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import without_tpu

from compiler.tpu.local_chips import pin_env
from compiler.tune.chip_workers import LocalChipPool, RayChipActors, measuring_executor
from compiler.tune.executors import (
    ExecutorError,
    InlineExecutor,
    LocalExecutor,
    RayExecutor,
    WorkerDied,
    make_executor,
)

# ---- evaluation functions (top level: pickled by reference into the workers) ----------------------------


def square(x: int) -> int:
    if x == 3:
        raise ValueError("three is not allowed")
    return x * x


def die_on_three(x: int) -> int:
    time.sleep(0.3)  # keeps the others in flight when the culprit's process dies
    if x == 3:
        os._exit(7)
    return x * x


def span(item: tuple[int, float]) -> tuple[int, float, float]:
    start = time.time()
    time.sleep(item[1])
    return os.getpid(), start, time.time()


def rendezvous(item: tuple[str, int]) -> int:
    """Finishes only if `count` calls run at the same time (each waits for the others to arrive)."""
    directory, count = item
    Path(directory, str(os.getpid())).touch()
    deadline = time.time() + 60
    while len(os.listdir(directory)) < count:
        if time.time() > deadline:
            raise TimeoutError("the other calls never ran at the same time")
        time.sleep(0.02)
    return os.getpid()


def touch_later(path: str) -> str:
    time.sleep(0.3)
    Path(path).touch()
    return path


def shout(x: int) -> int:
    print("noise from a worker", flush=True)
    return x


def report_sigterm(path: str) -> int:
    """Arrange for this worker to write `path` if it is ever sent SIGTERM (as libtpu's crash handler prints a
    stack trace then); its pid."""
    import signal

    def noted(signum, frame):
        Path(path).write_text("SIGTERM")
        os._exit(1)

    signal.signal(signal.SIGTERM, noted)
    return os.getpid()


def pinned(item: int) -> tuple[int, str | None, int]:
    """The chip a worker was pinned to (TPU_VISIBLE_CHIPS, set by Ray or by the local pool) and its pid."""
    return item, os.environ.get("TPU_VISIBLE_CHIPS"), os.getpid()


def pin_of(_: object) -> dict[str, str]:
    """The TPU_* variables of a worker (and libtpu's lockfile switch)."""
    return {k: v for k, v in os.environ.items() if k.startswith("TPU_") or k == "ALLOW_MULTIPLE_LIBTPU_LOAD"}


def overlapping(spans: list[tuple[int, float, float]]) -> bool:
    spans = sorted(spans, key=lambda s: s[1])
    return any(b[1] < a[2] - 0.05 for a, b in zip(spans, spans[1:], strict=False))


def check_results_and_errors(executor) -> None:
    results = dict(executor.map_unordered(square, range(6)))
    assert {k: v for k, v in results.items() if k != 3} == {0: 0, 1: 1, 2: 4, 4: 16, 5: 25}
    assert type(results[3]) is ValueError and str(results[3]) == "three is not allowed"


def check_worker_death_is_blamed_on_its_item(executor) -> None:
    results = dict(executor.map_unordered(die_on_three, range(6)))
    assert isinstance(results[3], WorkerDied)
    assert {k: v for k, v in results.items() if k != 3} == {0: 0, 1: 1, 2: 4, 4: 16, 5: 25}
    assert executor.submit(square, 4).result(timeout=30) == 16  # still usable


# ---- spec parsing and inline --------------------------------------------------------------------------


def test_make_executor_specs():
    assert isinstance(make_executor("inline"), InlineExecutor)
    with make_executor("local:3") as ex:
        assert isinstance(ex, LocalExecutor) and ex.parallelism == 3
    with make_executor("local") as ex:
        assert ex.parallelism == os.cpu_count()
    with make_executor("local", {"TPU": 1}) as ex:
        assert ex.parallelism == 1  # one process owns the TPU
    for bad in ("threads", "local:0", "local:x", "inline:2"):
        with pytest.raises(ExecutorError):
            make_executor(bad)
    with pytest.raises(ExecutorError, match="GPU"):
        make_executor("local", {"GPU": 1})


def test_inline_executor():
    check_results_and_errors(InlineExecutor())


# ---- local process pool -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pool():
    with LocalExecutor(2) as ex:
        yield ex


def test_local_pool_results_and_errors(pool):
    check_results_and_errors(pool)


def test_local_pool_runs_in_parallel_worker_processes(pool, tmp_path):
    pids = [r for _, r in pool.map_unordered(rendezvous, [(str(tmp_path), 2)] * 2)]
    assert len(set(pids)) == 2 and os.getpid() not in pids


def test_local_pool_worker_death_is_blamed_on_its_item(pool):
    check_worker_death_is_blamed_on_its_item(pool)


def test_local_pool_closing_the_iterator_cancels_the_rest(pool, tmp_path):
    paths = [str(tmp_path / f"{i}") for i in range(12)]
    results = pool.map_unordered(touch_later, paths)
    first = next(results)
    results.close()
    time.sleep(1.0)  # anything still running finishes; nothing queued may start
    assert first[1] == first[0]
    assert len(list(tmp_path.iterdir())) <= 1 + 2 * pool.parallelism


def test_local_shutdown_stops_running_work():
    ex = LocalExecutor(1)
    future = ex.submit(span, (0, 30.0))
    time.sleep(1.0)  # let it start
    start = time.monotonic()
    ex.shutdown(cancel=True)
    assert time.monotonic() - start < 10
    with pytest.raises(Exception):  # noqa: B017 - cancelled or broken, but never a result
        future.result(timeout=10)


def test_local_shutdown_of_a_finished_run_lets_workers_end_on_their_own(tmp_path):
    """A tuning run that finished shuts its pool down without cancelling: the workers end without a signal (a
    TPU worker sent SIGTERM has libtpu print a stack trace), promptly."""
    ex = LocalExecutor(1)
    marker = tmp_path / "sigterm"
    pid = ex.submit(report_sigterm, str(marker)).result(timeout=60)
    start = time.monotonic()
    ex.shutdown(cancel=False)
    assert time.monotonic() - start < 10
    assert not marker.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_finished_tuning_run_does_not_cancel_its_workers(monkeypatch, capsys, tmp_path):
    """`helion-pallas tune` that ran to its end lets its executors' workers end on their own; one stopped
    (Ctrl-C, the editor's cancel) stops them."""
    from compiler.cli import build_parser
    from compiler.tune import command

    shutdowns = []
    made = command.make_executor

    def recording(*args, **kwargs):
        ex = made(*args, **kwargs)
        real = ex.shutdown
        ex.shutdown = lambda cancel=True: shutdowns.append(cancel) or real(cancel)
        return ex

    monkeypatch.setattr(command, "make_executor", recording)
    example = Path(__file__).resolve().parents[1] / "examples" / "softmax.py"
    ns = build_parser().parse_args(["tune", str(example), "--chip", "v5e", "--max-evals", "5",
                                     "--store", str(tmp_path / "store.sqlite")])
    assert command.run(ns) == 0
    assert shutdowns and not any(shutdowns)


def test_local_workers_never_write_to_stdout(capfd):
    with LocalExecutor(1) as ex:
        assert ex.submit(shout, 5).result(timeout=60) == 5
    out, err = capfd.readouterr()
    assert "noise from a worker" not in out and "noise from a worker" in err


# ---- Ray on a local cluster ---------------------------------------------------------------------------

# A separate process starts the cluster, as a cluster started elsewhere would be; the tests connect with
# "ray:ADDRESS". Token authentication is switched off on both sides so no token file is involved.
HEAD = """
import sys, ray
ray.init(address="local", include_dashboard=False, num_cpus=2, resources={"TPU": 2}, log_to_driver=False)
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.read()
ray.shutdown()
"""


@pytest.fixture(scope="module")
def ray_address():
    ray = pytest.importorskip("ray")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    old = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_USAGE_STATS_ENABLED")}
    os.environ.update({"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"})
    head = subprocess.Popen(
        [sys.executable, "-c", HEAD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
        start_new_session=True,
    )
    try:
        ready, _, _ = select.select([head.stdout], [], [], 120)
        address = head.stdout.readline().strip() if ready else ""
        assert address, "the Ray head process did not start"
        # Task functions from this test module travel by value: Ray workers cannot import test files.
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
        yield address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        head.stdin.close()
        try:
            head.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, 9)  # the head and the Ray daemons it started (its own session)
            head.wait()
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def ray_executor(ray_address):
    ex = make_executor(f"ray:{ray_address}")
    assert isinstance(ex, RayExecutor) and ex.parallelism == 2
    yield ex
    ex.shutdown()


def test_ray_results_and_errors(ray_executor):
    check_results_and_errors(ray_executor)


def test_ray_worker_death_is_blamed_on_its_item(ray_executor):
    check_worker_death_is_blamed_on_its_item(ray_executor)


def test_ray_runs_tasks_in_parallel(ray_executor, tmp_path):
    pids = [r for _, r in ray_executor.map_unordered(rendezvous, [(str(tmp_path), 2)] * 2)]
    assert len(set(pids)) == 2 and os.getpid() not in pids


def test_ray_tpu_resource_serialises_tasks(ray_address):
    tpu = make_executor("ray", {"TPU": 2})  # reuses the connected cluster, which has two TPUs
    assert tpu.parallelism == 1
    spans = [r for _, r in tpu.map_unordered(span, [(i, 0.3) for i in range(4)])]
    assert len(spans) == 4 and not overlapping(spans)


def test_ray_rejects_what_the_cluster_cannot_do(ray_executor, ray_address):
    with pytest.raises(ExecutorError, match="GPU"):
        make_executor("ray", {"GPU": 1})
    with pytest.raises(ExecutorError, match="already connected"):
        make_executor("ray:127.0.0.1:1")


def test_ray_shutdown_cancels_running_tasks(ray_address):
    ex = make_executor(f"ray:{ray_address}")
    future = ex.submit(span, (0, 60.0))
    time.sleep(0.5)
    ex.shutdown(cancel=True)
    with pytest.raises(cf.CancelledError):
        future.result(timeout=10)


# ---- one worker per TPU chip (chip_workers.py) --------------------------------------------------------


def test_a_chip_worker_s_death_is_blamed_on_its_item_and_the_other_chip_goes_on():
    with LocalChipPool((0, 1)) as pool:
        check_worker_death_is_blamed_on_its_item(pool)
        assert {chip for _, (_, chip, _) in pool.map_unordered(pinned, range(4))} == {"0", "1"}


def test_ray_gives_one_actor_per_cluster_tpu_each_kept_on_the_chip_ray_pinned(ray_address):
    """This cluster declares two TPUs on a machine that has none: the scheduling and the pins are Ray's own, and
    each actor's probe says honestly that there is no chip behind its "TPU"."""
    ex = measuring_executor(f"ray:{ray_address}")
    try:
        assert isinstance(ex, RayChipActors) and ex.parallelism == 2
        assert sorted(label.rsplit(" ", 1)[1] for label in ex.labels) == ["0", "1"]
        results = dict(ex.map_unordered(pinned, range(8)))
        assert sorted(results) == list(range(8))
        pids: dict[str | None, set[int]] = {}
        for _, chip, pid in results.values():
            pids.setdefault(chip, set()).add(pid)
        assert sorted(pids) == ["0", "1"] and all(len(p) == 1 for p in pids.values())  # one process per chip
        for _, env in ex.on_each(pin_of, None).items():  # Ray's pin, completed as a local worker's
            pin = pin_env(int(env["TPU_VISIBLE_CHIPS"]))
            assert {k: env.get(k) for k in pin} == pin
        check_worker_death_is_blamed_on_its_item(ex)
    finally:
        ex.shutdown()


@without_tpu
def test_auto_asks_the_ray_cluster_and_says_its_tpus_have_no_chip(ray_address, capsys):
    """--evaluator auto with a Ray executor asks the cluster even though this machine has no TPU; each actor's
    probe says there is no chip behind its "TPU", so the tuning uses the model and says why."""
    import argparse

    from compiler.tune.command import _auto_evaluator

    ns = argparse.Namespace(evaluator="auto", executor=f"ray:{ray_address}")
    assert _auto_evaluator(ns, "v5e") is None and ns.evaluator == "model"
    err = capsys.readouterr().err
    assert "model estimates, not the chip: no TPU on this machine" in err, err
