"""A warm tuning process that forks each tuning (compiler/tune/standby.py, helion_ls/workers/standby.py): tunings run
in its forks with the command's answers, one after another without a new import; cancel kills a fork's
group; a dead standby means a tuner of the job's own, and a new standby after it; bad requests are answered
and the standby goes on; closed, it ends. Real processes and real tunings (the model evaluator)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from conftest import child_pythonpath
from test_ls_support import TWICE, until

import helion_ls.workers.standby
from helion_ls.workers.foreground import Foreground
from helion_ls.workers.standby import Forked
from helion_ls.workers.tuning import Tuner, TuneSpec

REPO = Path(__file__).resolve().parents[1]


def _spec(tmp_path: Path, max_evals: int | None = 3, shape_set: int = 0) -> TuneSpec:
    return TuneSpec(uri="file:///tmp/t.py", kernel="twice", shape_set=shape_set, source_hash="x", text=TWICE,
                    file_name="t.py", chip="v7x", evaluator="model", executor="inline",
                    store_path=str(tmp_path / "store.sqlite"), budget_seconds=600 if max_evals is None else None,
                    max_evals=max_evals)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is not alive
    except FileNotFoundError:
        return False


def _tuner() -> Tuner:
    return Tuner(on_change=lambda job: None, foreground=Foreground(grace=0.1), standby=True)


async def test_tunings_are_forks_of_the_standby_one_after_another(tmp_path):
    tuner = _tuner()
    standby = tuner.standby
    assert standby is not None and standby.pid is None  # nothing before it is wanted
    try:
        standby.want()
        await until(lambda: standby.ready)
        server = standby.pid
        for n in (1, 2):
            job = tuner.submit(_spec(tmp_path))
            await asyncio.wait_for(job.done.wait(), 120)
            assert job.state == "done", job.message
            assert isinstance(job.proc, Forked) and job.proc.pid != server and standby.served == n
            assert job.result["best"]["config"]["block_sizes"] and job.result["best"]["correctness"]["verdict"] == "ok"
            await until(lambda job=job: job.proc.returncode == 0)  # its exit, as the standby reported it
        assert standby.pid == server  # the same warm process served both
    finally:
        await tuner.shutdown()
    await until(lambda: not _alive(server))


async def test_cancel_kills_a_forked_tuning(tmp_path):
    tuner = _tuner()
    try:
        tuner.standby.want()
        await until(lambda: tuner.standby.ready)
        job = tuner.submit(_spec(tmp_path, max_evals=None))
        await until(lambda: job.proc is not None and job.state == "running")
        forked = job.proc.pid
        await asyncio.sleep(0.5)
        tuner.cancel_job(job)
        await until(lambda: not _alive(forked))
        await until(lambda: job.proc.returncode is not None)
        assert job.state == "cancelled"  # SIGTERM: it stops its search and ends (0), or is killed after the grace
        assert tuner.standby.ready  # the standby itself goes on
    finally:
        await tuner.shutdown()


async def test_a_dead_standby_is_started_again_and_one_that_cannot_start_means_a_tuner_of_its_own(tmp_path, monkeypatch):
    tuner = _tuner()
    standby = tuner.standby
    try:
        standby.want()
        await until(lambda: standby.ready)
        dead = standby.pid
        os.kill(dead, signal.SIGKILL)
        await until(lambda: not standby.ready)
        job = tuner.submit(_spec(tmp_path))  # starts a new standby and is its first fork
        await asyncio.wait_for(job.done.wait(), 120)
        assert job.state == "done", job.message
        assert isinstance(job.proc, Forked) and job.proc.standby not in (None, dead) and standby.served == 1
        again = standby.pid
        await standby.close()
        assert not standby.ready and not standby.wanted
        await until(lambda: not _alive(again))
        monkeypatch.setattr(helion_ls.workers.standby, "MODULE", "compiler.no_such_module")  # it dies at once
        job = tuner.submit(_spec(tmp_path, shape_set=0))
        await asyncio.wait_for(job.done.wait(), 120)
        assert job.state == "done", job.message
        assert not isinstance(job.proc, Forked) and standby.served == 1  # a tuner of its own
    finally:
        await tuner.shutdown()


def test_the_standby_answers_as_the_command_and_survives_bad_requests(tmp_path):
    env = {**os.environ, "PYTHONPATH": child_pythonpath(), "HELION_LS_ANALYSIS_CACHE": str(tmp_path / "cache.sqlite")}
    source = tmp_path / "t.py"
    source.write_text(TWICE)
    args = [str(source), "-k", "twice", "--chip", "v7x", "--json", "--max-evals", "3"]
    command = subprocess.run([sys.executable, "-m", "compiler.cli", "tune", *args, "--store",
                              str(tmp_path / "a.sqlite")], capture_output=True, text=True, env=env, timeout=300)
    assert command.returncode == 0, command.stderr[-2000:]
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    server = subprocess.Popen([sys.executable, "-m", "compiler.tune.standby"], stdin=theirs,
                              stdout=subprocess.PIPE, text=True, env=env)
    theirs.close()
    try:
        ours.send(b"[]")  # no output pipes
        assert "error" in json.loads(server.stdout.readline())
        out, err = os.pipe(), os.pipe()
        for bad in (b"not json", b'{"file": "t.py"}', b"[1, 2]"):
            socket.send_fds(ours, [bad], [out[1], err[1]])
            assert "error" in json.loads(server.stdout.readline())
        socket.send_fds(ours, [json.dumps(args + ["--store", str(tmp_path / "b.sqlite")]).encode()], [out[1], err[1]])
        for fd in (out[1], err[1]):
            os.close(fd)
        pid = json.loads(server.stdout.readline())["pid"]
        with os.fdopen(out[0]) as stdout, os.fdopen(err[0]) as stderr:
            printed, said = stdout.read(), stderr.read()
        assert json.loads(server.stdout.readline()) == {"exited": pid, "code": 0}, said[-2000:]
        ran, expected = json.loads(printed), json.loads(command.stdout)
        assert (ran["best"]["config"], ran["best"]["seconds"], ran["evaluated"]) == (
            expected["best"]["config"], expected["best"]["seconds"], expected["evaluated"])
    finally:
        ours.close()  # stdin closed: the standby ends
        assert server.wait(30) == 0


PARENT = """
import asyncio, sys, tempfile
from helion_ls.workers.foreground import Foreground
from helion_ls.workers.tuning import Tuner, TuneSpec
from test_ls_support import TWICE

async def main():
    tuner = Tuner(on_change=lambda job: None, foreground=Foreground(grace=0.1), standby=True)
    spec = TuneSpec(uri="file:///tmp/t.py", kernel="twice", shape_set=0, source_hash="x", text=TWICE,
                    file_name="t.py", chip="v7x", evaluator="model", executor="local",
                    store_path=tempfile.mktemp(suffix=".sqlite"), budget_seconds=600, max_evals=None)
    job = tuner.submit(spec)
    while job.proc is None or not job.events:
        await asyncio.sleep(0.05)
    print(tuner.standby.pid, job.proc.pid, flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline") as f:
            return f.read().replace("\0", " ").strip()
    except OSError:  # it ended since it was listed
        return ""


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    children.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(entry))
            except OSError:
                continue
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def test_a_killed_server_takes_the_standby_and_its_tunings_with_it(tmp_path):
    env = {**os.environ, "PYTHONPATH": child_pythonpath(REPO / "tests"),
           "HELION_LS_ANALYSIS_CACHE": str(tmp_path / "cache.sqlite")}
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, env=env)
    try:
        standby, forked = map(int, parent.stdout.readline().split())
        tree = {standby, forked} | _descendants(standby)  # the fork, its gate worker and reference process
        assert forked in tree and len(tree) >= 3
        # The search's workers and reference process are forks of the standby (they skip the imports); the
        # libtpu compile worker is started as a process of its own on purpose (libtpu's environment, stdout
        # kept apart), and only where libtpu is installed.
        workers = {p: _command(p) for p in _descendants(forked)}
        forks = {p: c for p, c in workers.items() if c.endswith("-m compiler.tune.standby")}
        assert forks and set(workers.values()) - set(forks.values()) <= {
            f"{sys.executable} -m compiler.tpu._libtpu_worker", ""}, workers  # "": one that ended meanwhile
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 30
    while any(_alive(p) for p in tree) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in tree if _alive(p)]
