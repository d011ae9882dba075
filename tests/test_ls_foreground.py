"""A tuning the user started goes first: while it runs, the server's background work waits (foreground.py) —
the second compile worker's start, low-priority compiles, the check worker and its stages — and starts once
it ended; the front stage does not wait. And once it ended, the look-up deciding the TPU compiler's check
of its result (an import) runs off the event loop, where the Best lens asked for at that moment would wait
behind it. Real compile and check workers, a real tuner process."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from types import SimpleNamespace

import pytest
from test_ls_support import TWICE, shut_down_pool, until

from compiler.tpu.libtpu_compile import libtpu_available
from helion_ls.features import crosscheck
from helion_ls.server import create_server
from helion_ls.session.analysis import Analyzer
from helion_ls.session.settings import SettingsRegistry
from helion_ls.workers import compile_pool
from helion_ls.workers.check_client import CheckClient
from helion_ls.workers.foreground import Foreground
from helion_ls.workers.tuning import TuneJob, Tuner, TuneSpec

REQUEST = {"source": TWICE, "kernel": "twice", "args": None, "config": None, "chip": "v7x", "file": "t.py"}


async def test_background_waits_through_the_grace_after_a_tuning_and_at_most_the_limit():
    foreground = Foreground(limit=600.0, grace=600.0)
    with foreground.running():
        waiter = asyncio.ensure_future(foreground.idle("check"))
        await asyncio.sleep(0.05)
    with foreground.running():  # the next shape set's Tune, right after the first ended: still first
        await asyncio.sleep(0.05)
        assert not waiter.done() and foreground.waiting == ["check"]
    await asyncio.sleep(0.05)
    assert not waiter.done() and foreground.holding and not foreground.busy  # within the grace
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    assert foreground.waiting == []
    foreground = Foreground(limit=0.2, grace=600.0)
    with foreground.running():
        await foreground.idle("check")  # a long tuning: background work runs beside it after the limit
        assert foreground.busy
        await foreground.idle("check")  # and from then on at once, while that stretch lasts
    await foreground.idle("check")


async def test_the_second_worker_and_low_priority_compiles_wait_for_a_tuning(monkeypatch):
    monkeypatch.setattr(compile_pool, "OTHERS_AFTER", 0.1)  # without a tuning it would start at once
    pool = compile_pool.CompilePool(workers=2)
    try:
        with pool.foreground.running():
            pool.start()
            first = await pool.run("twice", REQUEST, on_failure=pytest.fail)  # the front stage does not wait
            assert first["compiled"] is not None
            await until(lambda: "starting the compile worker" in pool.foreground.waiting)
        assert pool.foreground.holding  # the tuning ended, the grace has not
        low = asyncio.ensure_future(pool.run("again", REQUEST, pytest.fail, low_priority=True))
        await until(lambda: "a low-priority compile" in pool.foreground.waiting)
        assert len(pool.pids) == 1 and pool.submitted == 1 and not low.done()
        assert (await low)["compiled"] is not None
        await until(lambda: len(pool.pids) == 2)
        assert pool.foreground.waiting == []
    finally:
        await shut_down_pool(pool)


async def test_the_check_stages_wait_for_a_tuning_the_front_stage_does_not():
    pool = compile_pool.CompilePool(workers=1)
    checks = CheckClient()
    stages: list[tuple[str, bool]] = []
    analyzer = Analyzer(pool, checks, publish=lambda *a: None, on_stage=lambda uri, v, stage, final:
                        stages.append((stage, final)), on_loaded=lambda loaded: None, encoding=lambda: "utf-16")
    uri = "file:///tmp/twice.py"
    analyzer.update(uri, 1, TWICE)
    try:
        with pool.foreground.running():
            analysis = asyncio.ensure_future(analyzer.analyze(uri, "v7x", libtpu=False))
            await until(lambda: "the check worker" in pool.foreground.waiting)
            assert stages == [("front", False)] and checks.pid is None
        await analysis
        assert stages == [("front", False), ("lower", True)]
    finally:
        await checks.close()
        await shut_down_pool(pool)


def _spec(tmp_path, chip: str = "v7x") -> TuneSpec:
    return TuneSpec(uri="file:///tmp/t.py", kernel="missing", shape_set=0, source_hash="x", text=TWICE,
                    file_name="t.py", chip=chip, evaluator="model", executor="inline",
                    store_path=str(tmp_path / "store.sqlite"), budget_seconds=None, max_evals=1)


async def test_a_running_tuner_is_the_servers_foreground(tmp_path):
    """The server's tuner holds the foreground its compile pool waits for, from start to end of the job."""
    server = create_server()
    seen: list[tuple[str, int]] = []
    server.tuner.on_change = lambda job: seen.append((job.state, server.pool.foreground.jobs))
    spec = _spec(tmp_path)
    job = server.tuner.submit(spec)  # no such kernel: the tuner exits at once with a usage error
    await asyncio.wait_for(job.done.wait(), 120)
    await until(lambda: not server.tuner._running)
    assert seen[0] == ("queued", 0)
    assert ("running", 1) in seen and ("failed", 1) in seen
    assert server.pool.foreground.jobs == 0 and not server.pool.foreground.busy


async def test_the_compiler_check_after_a_tuning_is_decided_off_the_event_loop(tmp_path, monkeypatch):
    server = create_server()
    threads: list[str] = []
    real = crosscheck.enabled
    monkeypatch.setattr(crosscheck, "enabled", lambda *a: threads.append(threading.current_thread().name) or real(*a))
    job = TuneJob(_spec(tmp_path, "v5e"), state="done")
    server.settings.default = dataclasses.replace(server.settings.default, compiler_check="on")
    queued = crosscheck.after_tuning(server, job)
    assert threads == []  # nothing decided on the loop
    check = await queued
    assert threads and threads != [threading.main_thread().name]
    if libtpu_available():  # else no check is queued
        assert check is not None and check.spec.kind == "crosscheck"
        assert check is server.checker.jobs[job.id]
        await asyncio.wait_for(check.done.wait(), 120)  # no such kernel: it fails at once
        await until(lambda: not server.checker._running)


async def test_a_tuning_measured_on_the_chip_gets_no_compiler_check(tmp_path, monkeypatch):
    """Issue 42 item 4: what runs after a tuning follows what it measured: a best timed on the chip is no
    estimate, so no libtpu crosscheck is queued for it (nor decided: `enabled` is not asked). The server's
    settings and checker as crosscheck.py uses them (a model tuning gets its check: the test above)."""
    asked: list[tuple] = []
    monkeypatch.setattr(crosscheck, "enabled", lambda *a: asked.append(a) or True)
    server = SimpleNamespace(settings=SettingsRegistry(), checker=Tuner(lambda job: None, limit=1))
    server.settings.default = dataclasses.replace(server.settings.default, compiler_check="on")
    spec = dataclasses.replace(_spec(tmp_path, "v5e"), evaluator="auto")
    measured = TuneJob(spec, state="done", best={"config": {"block_sizes": [8]}, "seconds": 1e-4, "evaluator": "tpu"})
    assert await crosscheck.after_tuning(server, measured) is None
    assert asked == [] and not server.checker.jobs
