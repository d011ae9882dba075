"""Background tuning: one `python -m compiler.cli tune` subprocess per (document, kernel, shape set).

The tuner runs in its own process group on a temporary copy of the document text, so a crash or a hang
there is a state change here ("failed"), never a dead server; cancel and staleness kill the whole group.
Progress arrives as JSON lines on the child's stderr (`--progress jsonl`), with the phase: "searching"
(the search, and the refine step of slow evaluators) then "verifying" (the correctness gate on the winner).
The result arrives as JSON on stdout (`--json`), printed after the child closed the store (it writes every
trial itself): a successful result ends the job at once. The tuner ends its process as soon as it has
printed; should it linger (Ray, a stuck worker), it is reaped in the background. At most `limit` jobs run at once; the
rest wait in FIFO order ("queued"). A job whose kernel source hash changes while it is queued or running
becomes "stale": its result belongs to code that no longer exists, so it is stopped and never applied.
Every state change goes to `on_change(job)`; this module knows nothing about LSP. While a job of a Tuner
given a `foreground` runs, the server's background work waits (foreground.py): the user is waiting for it.

A job of kind "check" runs `helion-pallas check --json` (features/chip_check.py); one of kind "measure" runs
`helion-pallas measure --json` of one config (features/chip_time.py), in the slot `measure_slot(index)`. A job of kind "crosscheck" runs `helion-pallas crosscheck` instead (the TPU compiler's estimate of the model's
best configs, after a tuning; its result is the comparison's JSON): the same process handling, its own Tuner.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from compiler.support import lifeline

from .chip_owner import fallback_reason, waiting_title
from .foreground import Foreground
from .standby import Forked, Standby

log = logging.getLogger(__name__)

FINAL = ("done", "failed", "cancelled", "stale")
STREAM_LIMIT = 16 * 1024 * 1024
KILL_GRACE = 3.0  # seconds between SIGTERM and SIGKILL
SHUTDOWN_WAIT = 0.3  # seconds `shutdown` waits for killed tuners to be reaped
EXIT_GRACE = 10.0  # seconds a tuner that printed its result may take to exit before its group is killed
PHASES = {"search": "searching", "refine": "searching", "verify": "verifying"}  # CLI phase -> job phase


MEASURE_BASE = -2  # measure jobs' slots: -2 - index, apart from tunings' (index) and checks' (-1)


def measure_slot(index: int) -> int:
    """The Tuner's shape-set slot of a measure job of shape set `index`: one per shape set, beside its tuning."""
    return MEASURE_BASE - index


def measure_index(slot: int) -> int:
    return MEASURE_BASE - slot


@dataclass(frozen=True)
class TuneSpec:
    """Everything the CLI needs, fixed when the job is queued."""

    uri: str
    kernel: str
    shape_set: int
    source_hash: str
    text: str  # the document text at queue time
    file_name: str
    chip: str
    evaluator: str
    executor: str
    store_path: str | None
    budget_seconds: float | None
    max_evals: int | None
    kind: str = "tune"  # or "crosscheck"
    shape_key: str = ""  # the shape set's canonical text at queue time: its result belongs to these shapes
    config: str = ""  # kind "measure": the config measured, as JSON

    @property
    def index(self) -> int:
        """The kernel's shape set the job is about (a measure job's slot is not its index)."""
        return measure_index(self.shape_set) if self.kind == "measure" else self.shape_set

    def args(self, path: str) -> list[str]:
        """The arguments of `helion-pallas <kind>` for the document's text saved at `path`."""
        if self.kind == "check":  # one kernel, its small inputs, every loop strategy (features/chip_check.py)
            return [path, "-k", self.kernel, "--chip", self.chip, "--json"]
        if self.kind == "measure":  # one config on this machine's TPU (features/chip_time.py)
            return [path, "-k", self.kernel, "--shape-set", str(self.index), "--chip", self.chip,
                    "--config", self.config, "--json"]
        args = [path, "-k", self.kernel, "--shape-set", str(self.shape_set), "--chip", self.chip]
        if self.kind == "crosscheck":
            args += ["--json", "--progress", "jsonl"]
            return args + (["--store", self.store_path] if self.store_path else [])
        args += ["--evaluator", self.evaluator, "--executor", self.executor, "--json", "--progress", "jsonl"]
        if self.store_path:
            args += ["--store", self.store_path]
        if self.max_evals is not None:
            args += ["--max-evals", str(self.max_evals)]
        elif self.budget_seconds is not None:
            args += ["--budget", f"{self.budget_seconds:g}"]
        return args

    def argv(self, path: str) -> list[str]:
        return [sys.executable, "-m", "compiler.cli", self.kind, *self.args(path)]

    @property
    def deadline(self) -> float:
        """Seconds after which a silent or runaway tuner is considered hung."""
        if self.kind in ("crosscheck", "check", "measure"):  # libtpu simulations / runs on the chip
            return 1800.0
        budget = self.budget_seconds if self.max_evals is None and self.budget_seconds else 600.0
        return 2 * budget + 120.0


@dataclass
class TuneJob:
    spec: TuneSpec
    state: str = "queued"
    phase: str | None = None  # while running: "searching" | "verifying"
    evaluated: int = 0
    total: int = 0
    best: dict[str, Any] | None = None
    message: str | None = None
    result: dict[str, Any] | None = None  # the CLI's --json object
    started: float | None = None
    finished: float | None = None
    events: int = 0  # progress events received from the tuner
    shown: tuple[int, int, int] = (0, 0, 0)  # (evaluated, total, events) as last told the client (`show`)
    place: int = 0  # queued for this machine's TPU: its place in the chip's line (2 = next), else 0
    fallback: str | None = None  # why the tuner used the model on a machine with the chip (chip_owner.py)
    proc: asyncio.subprocess.Process | Forked | None = field(default=None, repr=False)
    done: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    def show(self) -> None:
        """The counts are being told to the client now (helion/tuningState): the title says them until the
        next time, so a lens fetched in between says what the client's notification says."""
        self.shown = (self.evaluated, self.total, self.events)

    @property
    def title(self) -> str:
        """The job's progress in a few words: the lens shows it and the client's notification too, with the
        counts last told the client (`show`), so the two always say the same. Until the tuner's first count
        it says it is starting (its imports take seconds), not "0"."""
        evaluated, total, events = self.shown
        if self.state == "queued":
            return waiting_title(self.place) if self.place else "Tuning queued…"
        if self.state != "running":
            return f"Tuning {self.state}"
        if self.phase == "verifying":
            return f"Verifying the best of {evaluated}…"
        if events == 0:
            return "Tuning… starting the tuner"
        return f"Tuning… {evaluated}{f'/{total}' if total else ''}"

    @property
    def id(self) -> tuple[str, str, int]:
        return (self.spec.uri, self.spec.kernel, self.spec.shape_set)

    @property
    def active(self) -> bool:
        return self.state not in FINAL


class Tuner:
    def __init__(self, on_change: Callable[[TuneJob], None], limit: int = 2, foreground: Foreground | None = None,
                 standby: bool = False, needs_chip: Callable[[TuneSpec], bool] | None = None):
        self.on_change = on_change
        self.limit = limit
        self.foreground = foreground or Foreground()  # counts this Tuner's running jobs
        # "tune" jobs are forks of a warm tuning process (standby.py)
        self.standby = Standby(self.foreground, STREAM_LIMIT) if standby else None
        self.jobs: dict[tuple[str, str, int], TuneJob] = {}
        self._queue: list[TuneJob] = []
        self._running: set[asyncio.Task] = set()
        # jobs that run on this machine's TPU run one at a time: the chip is held from the start of the
        # job's process to its exit (chip_owner.py)
        self.needs_chip = needs_chip or (lambda spec: False)
        self.chip_holder: TuneJob | None = None

    def submit(self, spec: TuneSpec) -> TuneJob:
        """Queue a job; an active job for the same unit is returned instead of a second one."""
        current = self.jobs.get((spec.uri, spec.kernel, spec.shape_set))
        if current is not None and current.active:
            return current
        job = TuneJob(spec)
        self.jobs[job.id] = job
        self._queue.append(job)
        self.on_change(job)
        self._pump()
        return job

    def active(self, uri: str | None = None, kernel: str | None = None) -> list[TuneJob]:
        return [
            j
            for j in self.jobs.values()
            if j.active and (uri is None or j.spec.uri == uri) and (kernel is None or j.spec.kernel == kernel)
        ]

    def cancel_job(self, job: TuneJob, why: str = "cancelled") -> None:
        if job.active:
            self._stop(job, "cancelled", why)

    def cancel(self, uri: str | None = None, kernel: str | None = None) -> list[TuneJob]:
        jobs = self.active(uri, kernel)
        for job in jobs:
            self._stop(job, "cancelled", "cancelled")
        return jobs

    def check_stale(self, uri: str, hashes: dict[str, str]) -> None:
        """The document now has these kernel hashes: stop jobs tuning a different (or vanished) source."""
        for job in self.active(uri):
            if hashes.get(job.spec.kernel) != job.spec.source_hash:
                self._stop(job, "stale", "the kernel was edited while tuning; the result would not match it")

    def set_limit(self, limit: int) -> None:
        self.limit = limit
        self._pump()

    async def shutdown(self) -> None:
        """Kill every tuner's process group at once (the store is written one transaction per trial, so
        nothing already found is lost) and give the jobs a moment to settle; never waits long."""
        if self.standby is not None:
            await self.standby.close()
        for job in self.active():
            self._stop(job, "cancelled", "the server is shutting down", grace=False)
        if self._running:
            await asyncio.wait(self._running, timeout=SHUTDOWN_WAIT)

    # -- internals ---------------------------------------------------------------------------------
    def _pump(self) -> None:
        """Start queued jobs in order while fewer than `limit` run; a job that needs the chip while another
        holds it keeps its place, and the jobs behind it that do not need the chip go ahead."""
        for job in list(self._queue):
            if len(self._running) >= self.limit:
                break
            if not job.active:
                self._queue.remove(job)
                continue
            if self.needs_chip(job.spec):
                if self.chip_holder is not None:
                    continue
                self.chip_holder = job
            self._queue.remove(job)
            job.place = 0
            task = asyncio.create_task(self._run(job))
            self._running.add(task)
            task.add_done_callback(lambda t, job=job: self._finished(t, job))
        self._tell_places()

    def _tell_places(self) -> None:
        """Each job waiting for the chip is told its place in line when it moves."""
        waiting = [j for j in self._queue if j.active and self.needs_chip(j.spec)]
        for place, job in enumerate(waiting, start=2):
            if self.chip_holder is None:  # waiting for a tuning slot, not for the chip
                place = 0
            if job.place != place:
                job.place = place
                self.on_change(job)

    def waiting_for_chip(self) -> list[TuneJob]:
        return [j for j in self._queue if j.active and j.place]

    def _finished(self, task: asyncio.Task, job: TuneJob) -> None:
        self._running.discard(task)
        if self.chip_holder is job:  # its process has exited (or was killed): the chip is free
            self.chip_holder = None
        if not task.cancelled() and task.exception() is not None:
            log.error("tuning task failed", exc_info=task.exception())
        self._pump()

    def _set(self, job: TuneJob, state: str, message: str | None = None) -> None:
        if not job.active:
            return
        job.state = state
        job.phase = "searching" if state == "running" else None
        if message is not None:
            job.message = message
        if state in FINAL:
            job.finished = time.time()
            job.done.set()
        self.on_change(job)

    def _stop(self, job: TuneJob, state: str, message: str, grace: bool = True) -> None:
        """End a job; its tuner gets SIGTERM (to stop cleanly) and SIGKILL after KILL_GRACE, or at once."""
        queued = job in self._queue
        if queued:
            self._queue.remove(job)
        self._set(job, state, message)
        if queued:
            self._tell_places()
        if job.proc is not None and job.proc.returncode is None:
            if grace:
                asyncio.create_task(_kill_group(job.proc))
            else:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(job.proc.pid, signal.SIGKILL)

    async def _run(self, job: TuneJob) -> None:
        with self.foreground.running():
            await self._run_job(job)

    async def _run_job(self, job: TuneJob) -> None:
        spec = job.spec
        with tempfile.TemporaryDirectory(prefix="helion-tune-") as tmp:
            path = os.path.join(tmp, spec.file_name)
            with open(path, "w", encoding="utf-8") as f:
                f.write(spec.text)
            job.started = time.time()
            argv = spec.argv(path)
            try:
                job.proc = await self._forked(spec, path) or await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    start_new_session=True,
                    limit=STREAM_LIMIT,
                    env=lifeline.child_env(),
                )
            except OSError as exc:
                self._set(job, "failed", f"could not start the tuner: {exc}")
                return
            if not job.active:  # cancelled or stale while starting
                await _kill_group(job.proc)
                return
            self._set(job, "running")
            log.info("tuning %s [%d] in pid %d: %s", spec.kernel, spec.shape_set, job.proc.pid, " ".join(argv))
            try:
                stdout, tail = await asyncio.wait_for(self._communicate(job), spec.deadline)
            except TimeoutError:
                await _kill_group(job.proc)
                self._set(
                    job, "failed", f"the tuner did not finish within {spec.deadline:.0f} s and was stopped"
                )
                return
            code = job.proc.returncode
        if not job.active:
            return
        self._conclude(job, code, stdout, tail)

    async def _forked(self, spec: TuneSpec, path: str) -> Forked | None:
        """A "tune" job run by a fork of the standby; None when there is none (the caller starts a tuner)."""
        if self.standby is None or spec.kind != "tune":
            return None
        return await self.standby.start(spec.args(path))

    async def _communicate(self, job: TuneJob) -> tuple[bytes, list[str]]:
        """Follow progress until the tuner exits (a successful result ends the job before that); then reap
        what it left in its process group."""
        proc = job.proc
        assert proc is not None and proc.stdout is not None
        tail: list[str] = []  # last non-JSON stderr lines, for failure messages
        tasks = [
            asyncio.ensure_future(_read_result(proc.stdout)),
            asyncio.ensure_future(_exited(proc)),
            asyncio.ensure_future(self._follow(job, tail)),
        ]
        read, exited, _ = tasks
        try:
            await asyncio.wait({read, exited}, return_when=asyncio.FIRST_COMPLETED)
            if read.done():
                result = _json_result(read.result())
                if job.active and _found(result):
                    self._succeed(job, result)
                printed = time.time()
                try:
                    await asyncio.wait_for(asyncio.shield(exited), None if job.active else EXIT_GRACE)
                    log.debug("tuner pid %d exited %.1f s after its result", proc.pid, time.time() - printed)
                except TimeoutError:
                    log.warning("tuner pid %d did not exit %.0f s after its result", proc.pid, EXIT_GRACE)
            with contextlib.suppress(ProcessLookupError):  # stray children would hold the pipes open
                os.killpg(proc.pid, signal.SIGKILL)
            await asyncio.wait(tasks, timeout=5)
            return (read.result() if read.done() else b""), tail
        finally:
            for task in tasks:
                task.cancel()

    async def _follow(self, job: TuneJob, tail: list[str]) -> None:
        assert job.proc is not None and job.proc.stderr is not None
        while line := await job.proc.stderr.readline():
            text = line.decode(errors="replace").strip()
            event = _json_line(text)
            if event is not None:
                self._on_event(job, event)
            elif (why := fallback_reason(text)) is not None:
                job.fallback = why
                log.warning("tuning %s: %s", job.spec.kernel, text)
                if job.active:
                    self.on_change(job)
            elif text:
                tail[:] = [*tail[-19:], text]
                log.debug("tuner %s: %s", job.spec.kernel, text)

    def _on_event(self, job: TuneJob, event: dict[str, Any]) -> None:
        if not job.active:
            return
        job.events += 1
        job.evaluated = int(event.get("evaluated") or job.evaluated)
        job.total = int(event.get("total") or job.total)
        job.phase = PHASES.get(event.get("phase"), job.phase)
        if event.get("best_config") is not None:
            job.best = {"config": event["best_config"], "seconds": event.get("best_seconds")}
        if event.get("event") == "progress":
            self.on_change(job)

    def _succeed(self, job: TuneJob, result: dict[str, Any]) -> None:
        job.result = result
        if result.get("best"):
            job.best = result["best"]
        job.evaluated = int(result.get("evaluated") or job.evaluated)
        log.info(
            "tuning %s [%d] done after %.1f s", job.spec.kernel, job.spec.shape_set, time.time() - job.started
        )
        self._set(job, "done", None)

    def _conclude(self, job: TuneJob, code: int | None, stdout: bytes, tail: list[str]) -> None:
        result = _json_result(stdout)
        if result is not None and (code == 0 or _found(result)):  # found, even if it was not stored
            self._succeed(job, result)
            return
        if code is not None and code < 0:
            why = f"the tuner was killed by signal {-code}"
        elif code == 1:
            why = "no valid config was found"
        else:
            why = f"the tuner exited with code {code}"
        detail = tail[-1] if tail else ""
        self._set(job, "failed", f"{why}{': ' + detail if detail else ''}")


def _found(result: dict[str, Any] | None) -> bool:
    """A tuner's result with a best config, or a crosscheck's comparison."""
    return result is not None and bool(result.get("best") or result.get("verdict"))


def _json_line(text: str) -> dict[str, Any] | None:
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) and "event" in value else None


async def _read_result(stream: asyncio.StreamReader) -> bytes:
    """stdout up to the end of the JSON value the tuner prints last, or to its end."""
    data = b""
    while chunk := await stream.read(64 * 1024):
        data += chunk
        if data.rstrip().endswith((b"}", b"]")) and _json_result(data) is not None:
            break
    return data


async def _exited(proc: asyncio.subprocess.Process | Forked) -> int:
    """The exit status once the process itself exited. (`Process.wait()` also waits until every process
    that inherited its pipes closed them: a stray child would keep it waiting.)"""
    while proc.returncode is None:
        await asyncio.sleep(0.05)
    return proc.returncode


def _json_result(stdout: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(stdout.decode(errors="replace") or "null")
    except json.JSONDecodeError:
        return None
    if isinstance(value, list):
        value = value[0] if value else None
    return value if isinstance(value, dict) else None


async def _kill_group(proc: asyncio.subprocess.Process | Forked) -> None:
    """SIGTERM the tuner's process group (it may have worker processes), SIGKILL after a grace period."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), KILL_GRACE)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
