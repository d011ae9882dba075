"""Where the tpu evaluator measures: one worker per TPU chip, on this host or across a Ray cluster of TPU VMs.

A TPU VM has 1, 4 or 8 chips. `measuring_executor(spec)` gives the tpu evaluator's executor for an executor
spec:
  local, local:N   one spawned worker per local chip (at most N), each pinned to its chip before jax starts
                   (compiler.tpu.local_chips: the count rule and the pin). One chip, or local:1: the single
                   unpinned worker of before, exactly.
  ray, ray:ADDR    one Ray actor per "TPU" resource of the cluster (Ray pins each to its chip with
                   TPU_VISIBLE_CHIPS): an actor keeps its chip open for the whole run (opening one costs 10-15 s;
                   a Ray task's worker process could be handed another chip by a later task while jax in it still
                   holds the first).
  inline           the tuning process itself.
Candidates go to the worker with the fewest unfinished ones (in turn when several have as few). Each
measurement says where it was made (the evaluator's `measured_on`: host and chip). `probe(executor, chip)` asks
every worker whether it has a chip of that kind; the ones that do not are dropped (said on stderr), and only
when none has one is the evaluator refused, with the first worker's reason (a Ray node without a TPU says "no
TPU on this machine").

May import this package's executors and compiler.tpu.local_chips (standard library only); ray lazily, and
evaluators (torch) only inside `probe`.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import socket
import sys
import threading
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from ..tpu.local_chips import LocalChips, local_chips, pin_env
from .executors import Executor, ExecutorError, LocalExecutor, connect_ray, fitting, make_executor

R = TypeVar("R")
ACTOR_START = 300.0  # seconds the Ray cluster may take to place and start the chip actors


class ChipWorkers(Executor):
    """An executor of one worker per chip: `labels` name them; `on_each` runs a call on every one; `keep` drops
    the others. Submissions go to the worker with the fewest unfinished ones."""

    def __init__(self) -> None:
        self._labels: dict[int, str] = {}  # worker -> where it measures ("chip 2", "host-b chip 0")
        self._busy: dict[int, int] = {}  # worker -> its unfinished tasks
        self._sent: dict[int, int] = {}  # worker -> the turn it was last sent one
        self._turn = 0
        self._lock = threading.Lock()

    @property
    def parallelism(self) -> int:  # type: ignore[override]
        return len(self._labels)

    @property
    def labels(self) -> list[str]:
        return list(self._labels.values())

    def _workers(self) -> list[int]:
        return list(self._labels)

    def _submit_to(self, worker: int, fn: Callable[..., R], *args: Any) -> cf.Future[R]:
        raise NotImplementedError

    def submit(self, fn: Callable[..., R], *args: Any) -> cf.Future[R]:
        with self._lock:  # the least busy; of those, the one sent work longest ago (a quick task frees its worker
            # before the next is sent: without the turn, every task would go to the first)
            worker = min(self._workers(), key=lambda w: (self._busy.get(w, 0), self._sent.get(w, -1)))
            self._busy[worker] = self._busy.get(worker, 0) + 1
            self._sent[worker] = self._turn = self._turn + 1
        future = self._submit_to(worker, fn, *args)
        future.add_done_callback(lambda _: self._finished(worker))
        return future

    def _finished(self, worker: int) -> None:
        with self._lock:
            self._busy[worker] = self._busy.get(worker, 1) - 1

    def on_each(self, fn: Callable[..., R], *args: Any) -> dict[int, R | BaseException]:
        """fn(*args) on every worker, waited for: worker -> its result or the exception it raised."""
        futures = {w: self._submit_to(w, fn, *args) for w in self._workers()}
        cf.wait(futures.values())
        return {w: f.exception() or f.result() for w, f in futures.items()}

    def keep(self, workers: list[int]) -> None:
        """Drop every worker not in `workers`."""
        for worker in [w for w in self._labels if w not in workers]:
            del self._labels[worker]
            self._drop(worker)

    def _drop(self, worker: int) -> None:
        raise NotImplementedError


class LocalChipPool(ChipWorkers):
    """One spawned single-worker pool per local chip, pinned with compiler.tpu.local_chips.pin_env."""

    def __init__(self, chips: tuple[int, ...]):
        super().__init__()
        self._pools = {chip: LocalExecutor(1, env=pin_env(chip)) for chip in chips}
        self._labels = {chip: f"chip {chip}" for chip in chips}

    def _submit_to(self, worker: int, fn: Callable[..., R], *args: Any) -> cf.Future[R]:
        return self._pools[worker].submit(fn, *args)

    def _pool_broken(self, exc: BaseException) -> bool:
        return isinstance(exc, BrokenProcessPool)

    def _restart(self) -> None:
        for pool in self._pools.values():  # only the chips whose worker died
            if getattr(pool._pool, "_broken", False):
                pool._restart()
        self._generation += 1

    def _drop(self, worker: int) -> None:
        self._pools.pop(worker).shutdown(cancel=True)

    def shutdown(self, cancel: bool = True) -> None:
        """Every chip's worker at once: each may take executors.END_GRACE to end on its own (its TPU runtime's
        teardown), and eight of those one after another would be minutes."""
        pools = list(self._pools.values())
        if pools:
            with cf.ThreadPoolExecutor(len(pools)) as ending:
                list(ending.map(lambda pool: pool.shutdown(cancel), pools))


class ChipActor:
    """A Ray actor that holds one TPU chip for the run and runs what it is sent. Ray gives it its chip with
    TPU_VISIBLE_CHIPS and the older host-bound names; the rest of local_chips.pin_env (the per-process bounds, which
    a VM's environment may preset to the whole host, and a port of its own per chip) is added before jax starts."""

    def __init__(self) -> None:
        chips = local_chips().indices
        if len(chips) == 1 and "TPU_VISIBLE_CHIPS" in os.environ:
            os.environ.update(pin_env(chips[0]))

    def run(self, fn: Callable[..., R], args: tuple[Any, ...]) -> R:
        return fn(*args)

    def where(self) -> str:
        return f"{socket.gethostname()} chip {os.environ.get('TPU_VISIBLE_CHIPS', '?')}"


class RayChipActors(ChipWorkers):
    """One actor per "TPU" resource of a Ray cluster, across its hosts."""

    def __init__(self, address: str | None, cpus: float = 1.0):
        super().__init__()
        ray = self._ray = connect_ray(address)
        count = fitting(ray, {"CPU": cpus, "TPU": 1.0})
        self._remote = ray.remote(ChipActor).options(num_cpus=cpus, resources={"TPU": 1.0}, max_restarts=0)
        self._actors = {i: self._remote.remote() for i in range(count)}
        self._dead: set[int] = set()  # actors whose process died: replaced before they are sent more
        self._refs: dict[cf.Future[Any], Any] = {}
        try:  # each actor placed on a TPU VM and started (a busy cluster may hold them back)
            where = ray.get([a.where.remote() for a in self._actors.values()], timeout=ACTOR_START)
        except ray.exceptions.GetTimeoutError:
            self.shutdown()
            raise ExecutorError(f"the Ray cluster did not start {count} TPU actors within {ACTOR_START:.0f} s") from None
        self._labels = dict(zip(self._actors, where, strict=True))

    def _submit_to(self, worker: int, fn: Callable[..., R], *args: Any) -> cf.Future[R]:
        if worker in self._dead:
            self._replace(worker)
        ref = self._actors[worker].run.remote(fn, args)
        outer: cf.Future[R] = cf.Future()
        self._refs[outer] = ref
        ref.future().add_done_callback(lambda inner: self._settle(worker, outer, inner))
        return outer

    def _replace(self, worker: int) -> None:
        """A new actor for a dead one (Ray's own restart would re-run nothing, but the tasks sent to the dead
        actor before its death was known fail on its way back up)."""
        self._dead.discard(worker)
        self._ray.kill(self._actors[worker])
        self._actors[worker] = self._remote.remote()

    def _settle(self, worker: int, outer: cf.Future[R], inner: cf.Future[R]) -> None:
        """The evaluation's own exception, not Ray's wrapper; an actor's death is delivered as Ray's error, which
        map_unordered treats as a broken pool (its other queued evaluations are re-run alone)."""
        self._refs.pop(outer, None)
        if outer.done():
            return
        exceptions = self._ray.exceptions
        exc = None if inner.cancelled() else inner.exception()
        if inner.cancelled() or isinstance(exc, exceptions.TaskCancelledError):
            outer.cancel()
        elif exc is None:
            outer.set_result(inner.result())
        elif isinstance(exc, exceptions.RayTaskError) and isinstance(exc.cause, Exception):
            outer.set_exception(exc.cause)
        else:
            if isinstance(exc, exceptions.RayActorError):
                self._dead.add(worker)
            outer.set_exception(exc)

    def _pool_broken(self, exc: BaseException) -> bool:
        return isinstance(exc, self._ray.exceptions.RayActorError)

    def _restart(self) -> None:
        for worker in list(self._dead):
            self._replace(worker)
        self._generation += 1

    def _cancel(self, future: cf.Future[Any]) -> None:
        future.cancel()
        ref = self._refs.pop(future, None)
        if ref is not None:
            self._ray.cancel(ref)  # an actor's task cannot be forced; one not started yet is dropped

    def _drop(self, worker: int) -> None:
        self._ray.kill(self._actors.pop(worker))

    def shutdown(self, cancel: bool = True) -> None:
        if not cancel:
            cf.wait(list(self._refs))
        for future in list(self._refs):
            self._cancel(future)
        for actor in self._actors.values():
            self._ray.kill(actor)  # the chip is free once its process ends
        self._actors.clear()


def measuring_executor(spec: str, chips: LocalChips | None = None) -> Executor:
    """The tpu evaluator's executor for an executor spec (see the module docstring); `chips` defaults to this
    machine's (local_chips())."""
    kind, _, arg = spec.partition(":")
    if kind == "ray":
        return RayChipActors(arg or None)
    if kind != "local":
        return make_executor(spec, {"TPU": 1.0})
    if arg and (not arg.isdigit() or int(arg) < 1):
        raise ExecutorError(f"local:N needs a positive worker count, not {arg!r}")
    found = (chips or local_chips()).indices[: int(arg) if arg else None]
    if len(found) < 2:
        return LocalExecutor(1)
    return LocalChipPool(found)


def probe(executor: Executor, chip: str) -> str | None:
    """None when a worker of `executor` has a TPU of `chip` (workers without one are dropped, said on stderr);
    else why not (the first worker's reason)."""
    from .evaluators import probe_tpu

    if not isinstance(executor, ChipWorkers):
        return executor.submit(probe_tpu, chip).result()
    answers = executor.on_each(probe_tpu, chip)
    labels = dict(executor._labels)
    why = {w: a if isinstance(a, str) else f"{type(a).__name__}: {a}" for w, a in answers.items() if a is not None}
    ready = [w for w in answers if w not in why]
    if not ready:
        return next(iter(why.values()), "no TPU worker")
    for w, reason in why.items():
        print(f"helion-pallas tune: {labels[w]} is left out: {reason}", file=sys.stderr)
    executor.keep(ready)
    return None
