"""One child process that answers requests, one at a time, and can always be stopped.

`WorkerProcess` starts `python -m <module>` in its own process group (dying with the server, see
compiler.support.lifeline) and speaks length-prefixed pickles over its stdin/stdout: 4 bytes of big-endian length,
then the pickle. The child (its side is worker_loop.py) first sends one frame ("ready") when it has warmed up. A request that outlives
its time limit, a child that exits, or an answer that is not a frame kills the child's whole group and
raises `WorkerFailure`; the next request starts a fresh child. The child's stderr goes to this log.
A child started before asyncio ran (prespawn.py) is `adopt`ed: its pipes become asyncio streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
from typing import Any

from compiler.support import lifeline

from .worker_loop import HEADER

log = logging.getLogger(__name__)

START_TIMEOUT = 180.0  # seconds for a child to import torch/jax and warm up


class WorkerFailure(Exception):
    """The worker died, hung or answered nonsense; the message says which, for the user."""


class WorkerProcess:
    def __init__(self, module: str, name: str):
        self.module = module
        self.name = name
        self._proc: asyncio.subprocess.Process | None = None
        self._stderr: asyncio.Task | None = None
        self._starting: asyncio.Task | None = None
        self._adopt: subprocess.Popen | None = None
        self.started = 0  # children started so far (restarts = started - 1)

    def adopt(self, popen: subprocess.Popen) -> None:
        """A child already started (prespawn.py): the first start takes it instead of starting one."""
        self._adopt = popen

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.returncode is None else None

    def prestart(self) -> None:
        """Start the child now, so the first request does not wait for its imports."""
        if self.pid is None and (self._starting is None or self._starting.done()):
            self._starting = asyncio.ensure_future(self._start())
            self._starting.add_done_callback(self._start_done)

    def _start_done(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:  # the next request tries again
            log.warning("%s", task.exception())

    async def wait_started(self) -> None:
        """Return once a start under way has ended (ready or failed); at once when none is."""
        if self._starting is not None and not self._starting.done():
            await asyncio.wait([self._starting])

    async def _ready(self) -> asyncio.subprocess.Process:
        if self._starting is not None and not self._starting.done():
            await asyncio.shield(self._starting)
        if self.pid is None:
            await self._start()
        assert self._proc is not None
        return self._proc

    async def _start(self) -> None:
        self.kill()
        self.started += 1
        popen, self._adopt = self._adopt, None
        if popen is not None:
            proc: Any = await _Adopted.of(popen)
        else:
            log.info("starting a %s", self.name)
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                self.module,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                env=lifeline.child_env(),
            )
        self._proc = proc
        self._stderr = asyncio.ensure_future(self._forward_stderr(proc))
        try:
            await asyncio.wait_for(self._read(proc), START_TIMEOUT)
        except (TimeoutError, WorkerFailure, asyncio.IncompleteReadError) as exc:
            self.kill()
            raise WorkerFailure(f"the {self.name} did not start ({exc or 'timed out'})") from None
        log.info("%s started (pid %d)", self.name, proc.pid)

    async def _forward_stderr(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        while line := await proc.stderr.readline():
            log.debug("%s %d: %s", self.name, proc.pid, line.decode(errors="replace").rstrip())

    @staticmethod
    async def _read(proc: asyncio.subprocess.Process) -> Any:
        assert proc.stdout is not None
        (size,) = HEADER.unpack(await proc.stdout.readexactly(HEADER.size))
        return pickle.loads(await proc.stdout.readexactly(size))

    async def ask(self, request: Any, timeout: float) -> Any:
        """Send one request and return the child's answer; WorkerFailure when it cannot answer in time."""
        proc = await self._ready()
        assert proc.stdin is not None
        payload = pickle.dumps(request)
        try:
            proc.stdin.write(HEADER.pack(len(payload)) + payload)
            await proc.stdin.drain()
            return await asyncio.wait_for(self._read(proc), timeout)
        except TimeoutError:
            self.kill()
            raise WorkerFailure(f"did not finish within {timeout:.0f} s; the {self.name} was stopped") from None
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
            self.kill()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), 1)
            code = proc.returncode
            raise WorkerFailure(f"the {self.name} exited ({_how(code) if code is not None else exc})") from None
        except (pickle.UnpicklingError, EOFError, ValueError) as exc:
            self.kill()
            raise WorkerFailure(f"the {self.name} answered with something unreadable ({exc})") from None

    def kill(self) -> None:
        """SIGKILL the child's process group (it never holds anything that needs a clean exit)."""
        proc, self._proc = self._proc, None  # forgotten at once (asyncio still reaps it): a new one may start
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            if isinstance(proc, _Adopted):  # asyncio does not reap what it did not start
                threading.Thread(target=proc.wait_blocking, name="helion-reap", daemon=True).start()
        if self._stderr is not None:
            self._stderr.cancel()


class _Adopted:
    """A `subprocess.Popen` seen as an `asyncio.subprocess.Process` (what WorkerProcess uses of it)."""

    def __init__(self, popen: subprocess.Popen, stdin: asyncio.StreamWriter, stdout: asyncio.StreamReader,
                 stderr: asyncio.StreamReader):
        self._popen, self.stdin, self.stdout, self.stderr = popen, stdin, stdout, stderr
        self.pid = popen.pid

    @staticmethod
    async def of(popen: subprocess.Popen) -> _Adopted:
        loop = asyncio.get_running_loop()
        readers = []
        for pipe in (popen.stdout, popen.stderr):
            reader = asyncio.StreamReader()
            await loop.connect_read_pipe(lambda reader=reader: asyncio.StreamReaderProtocol(reader), pipe)
            readers.append(reader)
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, popen.stdin)
        return _Adopted(popen, asyncio.StreamWriter(transport, protocol, None, loop), *readers)

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    async def wait(self) -> int:
        return await asyncio.get_running_loop().run_in_executor(None, self._popen.wait)

    def wait_blocking(self) -> int:
        return self._popen.wait()


def _how(code: int) -> str:
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"
