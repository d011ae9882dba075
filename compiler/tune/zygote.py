"""Calls that each run in a fresh fork of one warmed process, the zygote: the correctness gate's executor.

The gate's checks need torch and jax imported (~1.3 s of CPU); a pool of N workers would import them N
times. The zygote is forked from the tuning process before that imports torch, and runs `prepare` (the
imports) while the tuning process imports its own. Every call then runs in a fork of it — up to
`parallelism` at once, so the checks of several shape sets run side by side and none imports anything. A
call's fork ends with the call: a crash loses that call only (WorkerDied), and nothing a check leaves behind
(its memory, jax's backend and threads, its eager-reference process) reaches the next. The zygote never
runs a call itself, so it never starts jax's backend and stays safe to fork.

Standard library only at import (the tuning process creates this before it imports torch).
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import itertools
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from .. import lifeline
from .executors import Executor, WorkerDied

R = TypeVar("R")


class ZygoteExecutor(Executor):
    """`submit(fn, *args)` runs fn(*args) in a fork of the zygote, which is started on `start()` or the first
    submit; `parallelism` calls run at once, the others wait in the zygote."""

    def __init__(self, parallelism: int, prepare: Callable[[], None] | None = None):
        self.parallelism = max(1, parallelism)
        self._prepare = prepare
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._futures: dict[int, cf.Future[Any]] = {}
        self._proc: Any = None
        self._conn: Any = None

    def start(self) -> None:
        """Fork the zygote now, so that its `prepare` runs while the caller goes on."""
        with self._lock:
            self._ensure_started()

    def _ensure_started(self) -> None:
        if self._proc is not None and self._conn is not None:
            return
        ctx = multiprocessing.get_context("fork")
        mine, theirs = ctx.Pipe()
        # not a daemon: a call starts a process of its own (the eager reference), which a daemon may not
        proc = ctx.Process(target=_zygote, args=(theirs, os.getpid(), self._prepare, self.parallelism),
                           name="helion-gate")
        for stream in (sys.stdout, sys.stderr):  # else the fork flushes a copy of what is buffered
            stream.flush()
        proc.start()
        theirs.close()
        self._proc, self._conn = proc, mine
        atexit.register(self.shutdown)  # before multiprocessing's own exit hook, which would wait for the zygote
        threading.Thread(target=self._read, args=(mine,), name="helion-gate-reader", daemon=True).start()

    def submit(self, fn: Callable[..., R], *args: Any) -> cf.Future[R]:
        future: cf.Future[R] = cf.Future()
        with self._lock:
            self._ensure_started()
            try:
                payload = pickle.dumps((fn, args))
            except Exception as exc:  # noqa: BLE001 - as a process pool reports it: through the future
                future.set_exception(exc)
                return future
            call = next(self._ids)
            self._futures[call] = future
            try:
                self._conn.send(("run", call, payload))
            except (OSError, ValueError):  # the zygote is gone; the reader fails the futures it knew
                self._futures.pop(call, None)
                future.set_exception(WorkerDied("the gate's process ended"))
        return future

    def _read(self, conn: multiprocessing.connection.Connection) -> None:
        """Deliver each call's outcome to its future; when the zygote ends, fail what it still owed."""
        while True:
            try:
                kind, call, value = conn.recv()
            except (EOFError, OSError):
                break
            with self._lock:
                future = self._futures.pop(call, None)
            _settle(future, kind, value)
        with self._lock:
            owed, self._futures = self._futures, {}
            if self._conn is conn:  # the next submit starts a new zygote
                self._proc = self._conn = None
        for future in owed.values():
            _settle(future, "died", "the gate's process ended")

    def _cancel(self, future: cf.Future[Any]) -> None:
        with self._lock:
            call = next((c for c, f in self._futures.items() if f is future), None)
            if call is not None and self._conn is not None:
                try:
                    self._conn.send(("cancel", call, None))  # dropped if waiting, killed if running
                except (OSError, ValueError):
                    pass
        future.cancel()

    def shutdown(self, cancel: bool = True) -> None:
        atexit.unregister(self.shutdown)
        with self._lock:
            proc, conn = self._proc, self._conn
            pending = list(self._futures.values())
        if proc is None:
            return
        if not cancel:
            cf.wait(pending)
        with self._lock:
            self._proc = self._conn = None
        try:  # said, not left to the end of the pipe: a fork of this process may hold a copy of it
            conn.send(("stop", -1, None))
        except (OSError, ValueError):
            pass
        conn.close()
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join()


def _settle(future: cf.Future[Any] | None, kind: str, value: Any) -> None:
    if future is None or future.done():
        return
    try:
        if kind == "done":
            future.set_result(value)
        elif kind == "raised":
            future.set_exception(value)
        else:
            future.set_exception(WorkerDied(value))
    except cf.InvalidStateError:  # cancelled meanwhile
        pass


def _zygote(conn: Any, parent: int, prepare: Callable[[], None] | None, parallelism: int) -> None:
    """Prepare once, then fork one child per call (at most `parallelism` at a time) until the pipe closes."""
    lifeline.die_with_parent(parent)
    os.dup2(2, 1)  # the parent may speak a protocol on stdout (the language server's LSP)
    sys.stdout = sys.stderr
    if prepare is not None:
        prepare()
    waiting: deque[tuple[int, bytes]] = deque()  # (call, its pickled function and arguments)
    running: dict[Any, tuple[int, int]] = {}  # the child's result pipe -> (call, pid)
    while True:
        for ready in multiprocessing.connection.wait([conn, *running]):
            if ready is conn:
                try:
                    kind, call, payload = conn.recv()
                except (EOFError, OSError):
                    kind, call, payload = "stop", -1, None
                if kind == "stop":  # its calls end with it
                    for _, pid in running.values():
                        _kill(pid)
                    os._exit(0)
                if kind == "run":
                    waiting.append((call, payload))
                else:  # cancel
                    waiting = deque(w for w in waiting if w[0] != call)
                    for c, pid in running.values():
                        if c == call:
                            _kill(pid)
            else:
                call, pid = running.pop(ready)
                try:
                    kind, value = ready.recv()
                except (EOFError, OSError):
                    kind, value = "died", f"the process checking it died ({_status(pid)})"
                else:
                    os.waitpid(pid, 0)
                ready.close()
                conn.send((kind, call, value))
        while waiting and len(running) < parallelism:
            call, payload = waiting.popleft()
            mine, theirs = multiprocessing.Pipe(duplex=False)
            pid = os.fork()
            if pid == 0:
                mine.close()
                conn.close()
                _call(theirs, payload, os.getppid())
            theirs.close()
            running[mine] = (call, pid)


def _call(conn: Any, payload: bytes, zygote: int) -> None:
    """In a fresh fork: run the call, send its outcome, end (never returns). The call is unpickled here, so
    the zygote never imports what a call brings."""
    try:
        lifeline.die_with_parent(zygote)
        try:
            fn, args = pickle.loads(payload)
            reply: tuple[str, Any] = ("done", fn(*args))
        except BaseException as exc:  # noqa: BLE001 - the call's own exception is its outcome
            reply = ("raised", exc)
        try:
            conn.send(reply)
        except Exception as exc:  # noqa: BLE001 - an outcome that cannot be pickled
            conn.send(("raised", RuntimeError(f"the call's outcome cannot be sent back: {exc}")))
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001, S110 - nothing left to report it to
                pass
        os._exit(0)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _status(pid: int) -> str:
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit code {os.WEXITSTATUS(status)}"

