"""A warm tuning process (`python -m compiler.tune.standby`) that forks each tuning, so Tune starts at once.

A tuner started at the click spends its first one to two seconds importing torch and the tuner: most of
the wait for the Best lens on a laptop. Each "tune" job is instead a fork of the standby (`start`): its
stdout and stderr are pipes of this process, passed over the standby's socket; its pid and, later, its exit
status come back on the standby's stdout. `Forked` stands for such a tuning where tuning.py expects an
asyncio subprocess: a pid (its own process group), `returncode`, `stdout`, `stderr`, `wait()`. The server
starts the standby ahead of time (`want`) once a file's analysis is final (its imports would delay the
lowering and libtpu stages by ~1 s), in a workspace where tuning may run, and when no tuning runs (they
would compete with it too); a tuning asked for before that starts it and is its first fork. Should the
standby fail, that tuning starts a process of its own, as without one, and the next one starts a new
standby. It ends with the server. Linux only (forks of a process with torch, SOCK_SEQPACKET Unix sockets);
elsewhere every tuning starts its own process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
from typing import Any

from compiler.support import lifeline

from .foreground import Foreground

log = logging.getLogger(__name__)

MODULE = "compiler.tune.standby"
SUPPORTED = sys.platform.startswith("linux")  # fork after torch's import, AF_UNIX SOCK_SEQPACKET, passed fds
ANSWER_TIMEOUT = 60.0  # seconds a (just started) standby may take to say a fork's pid
CLOSE_WAIT = 1.0  # seconds `close` waits for the killed standby to be reaped


class Forked:
    """A tuning forked by the standby, as tuning.py uses an asyncio subprocess."""

    def __init__(self, pid: int, stdout: asyncio.StreamReader, stderr: asyncio.StreamReader, standby: int):
        self.pid = pid
        self.standby = standby  # the pid of the standby it is a fork of
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None
        self._exited = asyncio.Event()

    def ended(self, code: int) -> None:
        self.returncode = code
        self._exited.set()

    async def wait(self) -> int:
        await self._exited.wait()
        assert self.returncode is not None
        return self.returncode


class Standby:
    def __init__(self, foreground: Foreground, stream_limit: int):
        self.foreground = foreground
        self.stream_limit = stream_limit  # of the forks' stdout and stderr readers
        self.wanted = False  # a tuning may run in this server: keep the standby running (`want`)
        self.served = 0  # tunings forked (helion/stats)
        self._proc: asyncio.subprocess.Process | None = None
        self._channel: socket.socket | None = None
        self._starting: asyncio.Task | None = None
        self._reader: asyncio.Task | None = None
        self._answers: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._children: dict[int, Forked] = {}
        self._exits: dict[int, int] = {}  # exits reported before their `Forked` was made
        self._lock = asyncio.Lock()  # one request at a time: answers come back in order
        self._spawning = asyncio.Lock()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.returncode is None else None

    @property
    def ready(self) -> bool:
        return self.pid is not None and self._channel is not None

    def want(self) -> None:
        """Tunings may run here: start the standby once no tuning runs (foreground.idle), if none runs."""
        if not SUPPORTED or self.wanted:
            return
        self.wanted = True
        self._starting = asyncio.ensure_future(self._start_when_idle())

    async def _start_when_idle(self) -> None:
        await self.foreground.idle("starting the standby tuner")
        await self._ensure()

    async def _ensure(self) -> bool:
        """Start the standby unless it runs; True when it runs."""
        async with self._spawning:
            if not self.ready:
                await self._spawn()
        return self.ready

    async def _spawn(self) -> None:
        try:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        except OSError as exc:  # out of descriptors: tunings start their own process meanwhile
            log.warning("could not start the standby tuner: %s", exc)
            return
        try:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", MODULE,
                stdin=theirs,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,  # a tuning's own stderr is its pipe; nothing else is said
                start_new_session=True,
                env=lifeline.child_env(),
            )  # fmt: skip
        except OSError as exc:  # tunings start their own process, as without a standby
            log.warning("could not start the standby tuner: %s", exc)
            ours.close()
            return
        finally:
            theirs.close()
        self._channel = ours
        self._answers = asyncio.Queue()  # this process's answers only: a late one of a dead standby goes nowhere
        self._reader = asyncio.ensure_future(self._read(self._proc, self._answers))
        log.info("standby tuner started: pid %d", self._proc.pid)

    async def _read(self, proc: asyncio.subprocess.Process, answers: asyncio.Queue[dict[str, Any]]) -> None:
        assert proc.stdout is not None
        while line := await proc.stdout.readline():
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "exited" in message:
                child = self._children.pop(message["exited"], None)
                if child is not None:
                    child.ended(int(message["code"]))
                else:
                    self._exits[message["exited"]] = int(message["code"])
            else:
                answers.put_nowait(message)
        (log.warning if self.wanted else log.debug)("the standby tuner ended (pid %d)", proc.pid)
        answers.put_nowait({"error": "the standby tuner ended"})
        self._closed(proc)

    def _closed(self, proc: asyncio.subprocess.Process) -> None:
        """The standby `proc` is gone: its tunings died with it, and the next tuning starts another."""
        for pid, child in list(self._children.items()):
            if child.standby == proc.pid:
                child.ended(-signal.SIGKILL)
                del self._children[pid]
        if self._proc is proc and self._channel is not None:
            self._channel.close()
            self._channel = None

    async def start(self, args: list[str]) -> Forked | None:
        """A fork of the standby (started now if it does not run) running `helion-pallas tune <args>`; None
        when that failed (the caller starts a tuner itself)."""
        if not SUPPORTED:
            return None
        self.wanted = True
        if not await self._ensure():
            return None
        async with self._lock:
            return await self._fork(args)

    async def _fork(self, args: list[str]) -> Forked | None:
        channel, proc, answers = self._channel, self._proc, self._answers
        if channel is None or proc is None:
            return None
        pipes: list[tuple[int, int]] = []
        try:
            pipes += [os.pipe(), os.pipe()]
            socket.send_fds(channel, [json.dumps(args).encode()], [pipes[0][1], pipes[1][1]])
        except OSError as exc:
            log.warning("the standby tuner could not take a tuning: %s", exc)
            for r, w in pipes:
                os.close(r)
                os.close(w)
            return None
        for _, w in pipes:
            os.close(w)  # the fork holds them now: end of file once it (and what it started) ended
        try:
            answer = await asyncio.wait_for(answers.get(), ANSWER_TIMEOUT)
        except TimeoutError:  # stuck: stopped, so that no late answer is taken for another request's
            answer = {"error": f"no answer within {ANSWER_TIMEOUT:.0f} s"}
            _kill(proc)
        if "pid" not in answer:
            log.warning("the standby tuner did not fork a tuning: %s", answer.get("error"))
            for r, _ in pipes:
                os.close(r)
            return None
        stdout, stderr = [await _reader(r, self.stream_limit) for r, _ in pipes]
        child = Forked(int(answer["pid"]), stdout, stderr, proc.pid)
        if child.pid in self._exits:
            child.ended(self._exits.pop(child.pid))
        else:
            self._children[child.pid] = child
        self.served += 1
        return child

    async def close(self) -> None:
        """Stop wanting it and stop it (its tunings are killed by their own jobs); waits a moment at most."""
        self.wanted = False
        if self._starting is not None:
            self._starting.cancel()
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        proc = self._proc
        if proc is not None and proc.returncode is None:
            _kill(proc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), CLOSE_WAIT)
        if self._reader is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._reader, CLOSE_WAIT)


async def _reader(fd: int, limit: int) -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", 0))
    return reader


def _kill(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the standby's process group (its forks have groups of their own)."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
