"""The server's side of the check worker (see `check_worker.py`): one child process, one request at a time.

A worker that exits, writes garbage or exceeds its time limit is killed (with its process group) and
replaced on the next request; the request in flight fails with `WorkerFailure`, which the analysis turns
into one diagnostic. Callers pass `wanted()` so requests for versions that are already stale are dropped
before they reach the worker.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from compiler.support import lifeline

log = logging.getLogger(__name__)

STREAM_LIMIT = 64 * 1024 * 1024  # one response line may carry many diagnostics


class WorkerFailure(Exception):
    """The worker died, hung or answered nonsense; the message says which."""


class Skipped(Exception):
    """The request was no longer wanted when its turn came."""


class CheckClient:
    def __init__(self, timeouts: dict[str, float] | None = None):
        self._proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self._stderr_task: asyncio.Task | None = None
        self.timeouts = timeouts or {"lower": 180.0, "tpu": 600.0}
        self.restarts = 0
        self.closed = False  # after shutdown no worker is (re)started
        self.busy: dict[str, Any] | None = None  # {"kernel", "stage"} of the request in flight
        self._starting = False

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc and self._proc.returncode is None else None

    async def _ensure(self) -> asyncio.subprocess.Process:
        if self._proc is not None and self._proc.returncode is None:
            return self._proc
        if self._proc is not None:
            self.restarts += 1
            log.warning("check worker exited (code %s); starting a new one", self._proc.returncode)
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "helion_ls.workers.check_worker",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            limit=STREAM_LIMIT,
            env=lifeline.child_env(),
        )
        self._stderr_task = asyncio.create_task(self._forward_stderr(self._proc))
        log.info("check worker started (pid %d)", self._proc.pid)
        return self._proc

    @staticmethod
    async def _forward_stderr(proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        while line := await proc.stderr.readline():
            log.debug("check worker: %s", line.decode(errors="replace").rstrip())

    def prestart(self) -> None:
        """Start the worker now (its imports take seconds) so the first check does not wait for them."""
        if self.closed or (self._proc is not None and self._proc.returncode is None) or self._starting:
            return
        self._starting = True

        async def start() -> None:
            try:
                async with self._lock:
                    if not self.closed:
                        await self._ensure()
            finally:
                self._starting = False

        task = asyncio.ensure_future(start())
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def request(self, req: dict[str, Any], wanted: Callable[[], bool] = lambda: True) -> list[dict]:
        """Send one request; the worker's diagnostics (JSON) or WorkerFailure / Skipped.

        The exchange itself is shielded: a cancelled caller must not leave an unread answer in the pipe.
        """
        task = asyncio.ensure_future(self._exchange(req, wanted))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return await asyncio.shield(task)

    async def _exchange(self, req: dict[str, Any], wanted: Callable[[], bool]) -> list[dict]:
        async with self._lock:
            if self.closed or not wanted():
                raise Skipped()
            proc = await self._ensure()
            req = {**req, "id": next(self._ids)}
            self.busy = {"kernel": req.get("kernel"), "stage": req["stage"]}
            try:
                return await self._send(proc, req)
            finally:
                self.busy = None

    async def _send(self, proc: asyncio.subprocess.Process, req: dict[str, Any]) -> list[dict]:
        """One request/answer exchange with a running worker."""
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write((json.dumps(req) + "\n").encode())
            await proc.stdin.drain()
            line = await asyncio.wait_for(proc.stdout.readline(), self.timeouts.get(req["stage"], 300.0))
        except TimeoutError:
            self.kill()
            raise WorkerFailure(
                f"the {req['stage']} check took longer than {self.timeouts[req['stage']]:.0f} s"
            ) from None
        except (ConnectionError, OSError) as exc:
            self.kill()
            raise WorkerFailure(f"lost the check worker ({exc})") from None
        if not line:
            await proc.wait()
            if self.closed:
                raise Skipped()
            raise WorkerFailure(f"the check worker exited with code {proc.returncode} (crashed)")
        try:
            resp = json.loads(line)
        except json.JSONDecodeError:
            self.kill()
            raise WorkerFailure("the check worker answered with something that is not JSON") from None
        if resp.get("id") != req["id"]:
            self.kill()
            raise WorkerFailure("the check worker answered out of turn")
        if "error" in resp:
            raise WorkerFailure(resp["error"].strip().splitlines()[-1])
        return resp["diagnostics"]

    def kill(self) -> None:
        """Kill the worker and whatever it started (libtpu compile processes)."""
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    async def close(self) -> None:
        self.closed = True
        self.kill()
        if self._proc is not None:
            try:
                await asyncio.wait_for(self._proc.wait(), 0.3)
            except TimeoutError:
                log.warning("check worker %d was killed but not yet reaped", self._proc.pid)
        if self._stderr_task:
            self._stderr_task.cancel()
