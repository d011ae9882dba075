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
the tuning process's own, which must not wait for them. Further workers (up to `max_workers`) are forked
on demand, when a check arrives while the others are busy. Standard library only at import: the tuning
command builds the pool before it imports torch itself.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import threading

from .executors import LocalExecutor, _worker_init

PRELOAD = "compiler.tune.gate_imports"


class GatePool(LocalExecutor):
    """A LocalExecutor whose workers are forks of a fork server that preloaded the gate's imports."""

    def _new_pool(self) -> cf.ProcessPoolExecutor:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([PRELOAD])
        return cf.ProcessPoolExecutor(max_workers=self.parallelism, mp_context=context, initializer=_init_worker)

    def start(self) -> None:
        """Start the server and the first worker now, without waiting: the first check then finds it ready."""
        threading.Thread(target=self._start_first_worker, name="helion-gate-start", daemon=True).start()

    def _start_first_worker(self) -> None:
        try:
            self.submit(os.getpid)  # a trivial task: starting its worker is the point
        except Exception:  # noqa: BLE001 - the first check starts a worker the same way and reports what fails
            pass


def _init_worker() -> None:
    """Each worker, as it starts: nothing it prints reaches the tuning process's stdout; it ends with the
    server that forked it; its eager-reference process is a fork of it (torch without another import)."""
    from .. import lifeline
    from .correctness import reference_process

    _worker_init()
    lifeline.die_with_parent(os.getppid())
    reference_process().start(fork=True)
