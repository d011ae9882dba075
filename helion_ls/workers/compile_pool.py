"""Runs the compiler's first stage in warm worker processes, once per distinct unit, and short calls in a thread.

`run(key, request, on_failure)` hands a compile request (see compile_worker.py) to one of `workers` warm
processes. Identical units (same key) share one job; a job whose every caller went away (a newer version
of the document replaced it) before a worker was free is dropped unstarted. A compile that does not answer
within `timeout` costs its worker, which is killed and replaced, and comes back as `on_failure(why)`, so a
pathological kernel never blocks the event loop or the other kernels. A `low_priority` job (confirming a
remembered result) starts only when no other job waits, and like the second worker's start it also waits
while the user's tuning runs (`foreground`, see foreground.py). `call(fn, ...)` runs a short
blocking call (parsing a document, reading the store) in one thread, never behind compiles.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .foreground import Foreground
from .worker_process import WorkerFailure, WorkerProcess

log = logging.getLogger(__name__)

T = TypeVar("T")
TIMEOUT_ENV = "HELION_LS_COMPILE_TIMEOUT"  # seconds one compile may take (default 30)
OTHERS_AFTER = 3.0  # seconds after the first worker is ready when the others start, if it has not answered


@dataclass(eq=False)
class _Job:
    key: Hashable
    request: dict[str, Any]
    future: asyncio.Future
    waiters: int = 0
    started: bool = False
    result: Any = field(default=None, repr=False)


class CompilePool:
    def __init__(self, workers: int | None = None, timeout: float | None = None, first: Any = None):
        """`first`: the first worker's process, already started (prespawn.py)."""
        self.workers = [
            WorkerProcess("helion_ls.workers.compile_worker", "compile worker")
            for _ in range(workers or max(1, min(2, os.cpu_count() or 1)))
        ]
        if first is not None:
            self.workers[0].adopt(first)
        self.timeout = timeout or float(os.environ.get(TIMEOUT_ENV) or 30.0)
        self._queue: deque[_Job] = deque()
        self._low: deque[_Job] = deque()  # taken only when _queue is empty
        self._jobs: dict[Hashable, _Job] = {}
        self._wake: asyncio.Event | None = None
        self._first_answer: asyncio.Event | None = None
        self._servers: list[asyncio.Task] = []
        self._quick = ThreadPoolExecutor(1, thread_name_prefix="helion-quick")
        self.foreground = Foreground()  # tunings the user started: background work here waits for them
        self.submitted = 0  # compiles actually started (cache and in-flight hits excluded)
        self.failures = 0  # compiles that cost their worker (time limit, crash)

    def start(self) -> None:
        """Start the first worker (its imports take seconds) and the tasks that feed the workers. The
        others start once the first has answered (or OTHERS_AFTER seconds after it is ready): on two
        cores, their imports would otherwise compete with the server's own imports and the first compile
        of a cold start."""
        if self._servers:
            return
        self._wake = asyncio.Event()
        self._first_answer = asyncio.Event()
        first = self.workers[0]
        first.prestart()
        self._servers.append(asyncio.ensure_future(self._serve(first)))
        for worker in self.workers[1:]:
            self._servers.append(asyncio.ensure_future(self._serve(worker, after=first)))

    @property
    def pids(self) -> list[int]:
        return [pid for w in self.workers if (pid := w.pid) is not None]

    async def run(self, key: Hashable, request: dict[str, Any], on_failure: Callable[[str], T],
                  low_priority: bool = False) -> Any:
        """The worker's answer for `request`, shared with other callers of the same key."""
        self.start()
        job = self._jobs.get(key)
        if job is None:
            job = _Job(key, request, asyncio.get_running_loop().create_future())
            self._jobs[key] = job
            (self._low if low_priority else self._queue).append(job)
            assert self._wake is not None
            self._wake.set()
        job.waiters += 1
        try:
            return await asyncio.shield(job.future)
        except WorkerFailure as exc:
            return on_failure(str(exc))
        finally:
            job.waiters -= 1

    async def _serve(self, worker: WorkerProcess, after: WorkerProcess | None = None) -> None:
        assert self._wake is not None and self._first_answer is not None
        if after is not None:  # takes jobs once warm: the first worker keeps the queue meanwhile
            await after.wait_started()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._first_answer.wait(), OTHERS_AFTER)
            await self.foreground.idle(f"starting the {worker.name}")
            worker.prestart()
            await worker.wait_started()
        while True:
            if not self._queue and self._low and self.foreground.holding:
                await self.foreground.idle("a low-priority compile")
            job = self._take()
            if job is None:
                self._wake.clear()
                await self._wake.wait()
                continue
            job.started = True
            self.submitted += 1
            try:
                job.future.set_result(await worker.ask(job.request, self.timeout))
            except WorkerFailure as exc:
                self.failures += 1
                log.error("compile of %s failed: %s", job.key, exc)
                job.future.set_exception(exc)
                worker.prestart()  # a fresh worker warms up while the queue waits
            except Exception as exc:  # a bug here must fail one job, not stop this worker's feed
                log.exception("compile of %s", job.key)
                job.future.set_exception(WorkerFailure(f"internal error: {exc!r}"))
            finally:
                self._first_answer.set()
                if job.future.done() and not job.future.cancelled():
                    job.future.exception()  # retrieved, even when every caller went away meanwhile
                self._jobs.pop(job.key, None)

    def _take(self) -> _Job | None:
        """The oldest job someone still waits for, low-priority ones last; abandoned ones are dropped."""
        for queue in (self._queue, self._low):
            while queue:
                job = queue.popleft()
                if job.waiters > 0:
                    return job
                self._jobs.pop(job.key, None)
                job.future.cancel()
        return None

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """A short blocking call (loading a module, reading the store) off the loop, never behind compiles."""
        return await asyncio.get_running_loop().run_in_executor(self._quick, fn, *args)

    def shutdown(self) -> None:
        for task in self._servers:
            task.cancel()
        for worker in self.workers:
            worker.kill()
        self._quick.shutdown(wait=False, cancel_futures=True)
