"""The correctness gate's workers for a model-evaluator tuning run: forks of one server that imported torch,
jax and the gate once, so that two checks can run at once without paying those imports twice.

Why: a check (generated code in TPU interpret mode against the eager reference) costs ~1.3 CPU-s and each
shape set's winner needs one, so one worker checking them in turn was the tail of a tuning run while the
other core sat idle. A second spawned worker would import torch and jax again (~2 CPU-s); a fork of a
server that holds them costs nothing. The server is multiprocessing's fork server, whose preload imports
`gate_imports` (torch, jax, Pallas' TPU interpret mode, the gate; jax's backend — whose threads a fork
would not carry over — is not initialised there, only in each worker at its first check). Every worker
then forks its own eager-reference process (correctness.reference_process), which has torch without
importing it.

`start()` launches the server and the first worker from a thread: the server's imports (seconds) run beside
the tuning process's own. Starting a worker waits for those imports, so until the first worker is up a
submitted check is held here and handed over then: `submit` never makes the search wait. Further workers (up
to `max_workers`) are forked on demand, when a check arrives while the others are busy. Standard library
only at import: the tuning command builds the pool before it imports torch itself.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from .executors import LocalExecutor, quiet_worker

PRELOAD = "compiler.tune.gate_imports"
R = TypeVar("R")


class GatePool(LocalExecutor):
    """A LocalExecutor whose workers are forks of a fork server that preloaded the gate's imports."""

    def __init__(self, max_workers: int | None = None):
        super().__init__(max_workers)
        self._lock = threading.Lock()
        self._held: list[tuple[cf.Future[Any], Callable[..., Any], tuple[Any, ...]]] | None = None

    def _new_pool(self) -> cf.ProcessPoolExecutor:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([PRELOAD])
        return cf.ProcessPoolExecutor(max_workers=self.parallelism, mp_context=context, initializer=_init_worker)

    def start(self) -> None:
        """Start the server and the first worker now, without waiting: the first check then finds it ready."""
        with self._lock:
            if self._held is not None:
                return
            self._held = []
        threading.Thread(target=self._start_first_worker, name="helion-gate-start", daemon=True).start()

    def submit(self, fn: Callable[..., R], *args: Any) -> cf.Future[R]:
        with self._lock:
            if self._held is not None:  # the first worker is starting: hand this over once it is up
                future: cf.Future[R] = cf.Future()
                self._held.append((future, fn, args))
                return future
        return super().submit(fn, *args)

    def _start_first_worker(self) -> None:
        try:
            super().submit(os.getpid).result()  # a trivial task: starting its worker is the point
        except Exception:  # noqa: BLE001 - the held checks start a worker the same way and report what fails
            pass
        with self._lock:
            held, self._held = self._held or [], None
        for future, fn, args in held:
            if future.set_running_or_notify_cancel():  # not cancelled meanwhile
                try:
                    _chain(super().submit(fn, *args), future)
                except Exception as exc:  # noqa: BLE001 - delivered through the future, as a pool would
                    future.set_exception(exc)


def _chain(source: cf.Future[R], target: cf.Future[R]) -> None:
    def copy(done: cf.Future[R]) -> None:
        if done.cancelled():  # the pool was shut down with it queued
            target.set_exception(cf.CancelledError())
            return
        exc = done.exception()
        if exc is not None:
            target.set_exception(exc)
        else:
            target.set_result(done.result())

    source.add_done_callback(copy)


def _init_worker() -> None:
    """Each worker, as it starts: nothing it prints reaches the tuning process's stdout; it ends with the
    server that forked it; its eager-reference process is a fork of it (torch without another import)."""
    from .. import lifeline
    from .correctness import reference_process

    quiet_worker()
    lifeline.die_with_parent(os.getppid())
    reference_process().start(fork=True)
