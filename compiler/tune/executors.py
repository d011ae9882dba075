"""Where evaluations run: in the calling thread, in a local process pool, or as Ray tasks.

`make_executor("inline" | "local" | "local:N" | "ray" | "ray:ADDRESS", resources)` returns an `Executor`
with one interface: `submit(fn, *args) -> concurrent.futures.Future`, `map_unordered(fn, items)` yielding
`(item, result or the exception it raised)` as they finish, `shutdown(cancel=True)`, and `parallelism`
(how many evaluations can run at once, for batch sizes). Functions and arguments must be picklable
(top-level functions, `functools.partial` of them), since they cross process boundaries.

A worker process that dies (a crash in a compiler, `os._exit`, the OOM killer) is reported as `WorkerDied`
for the evaluation that killed it only: the local pool re-runs the other evaluations caught in the same
broken pool one at a time, so an innocent evaluation is never blamed. Workers never write to the parent's
stdout (the language server speaks LSP there): local workers have stdout redirected to stderr, and Ray is
started with `log_to_driver=False`.
"""

from __future__ import annotations

import abc
import concurrent.futures as cf
import logging
import multiprocessing
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from ..support import lifeline
from ..support.forking import forks_with_torch

log = logging.getLogger(__name__)

I = TypeVar("I")  # noqa: E741 - the item type of map_unordered
R = TypeVar("R")


class ExecutorError(RuntimeError):
    """An executor spec or resource request that cannot be satisfied."""


class WorkerDied(RuntimeError):
    """The process running this evaluation died before returning a result."""


class Executor(abc.ABC):
    parallelism: int
    _generation = 0  # bumped by _restart: futures of an older pool must not restart the new one

    @abc.abstractmethod
    def submit(self, fn: Callable[..., R], *args: Any) -> cf.Future[R]:
        """Start fn(*args); the future's exception is what fn raised (or WorkerDied)."""

    @abc.abstractmethod
    def shutdown(self, cancel: bool = True) -> None:
        """Release workers. cancel=True drops queued work and stops running work; False waits for it."""

    def _cancel(self, future: cf.Future[Any]) -> None:
        future.cancel()

    def _pool_broken(self, exc: BaseException) -> bool:
        """True when exc means "the pool broke" rather than "this evaluation failed"."""
        return False

    def _restart(self) -> None:
        """Replace a broken pool (only executors whose _pool_broken can say True have one)."""
        raise NotImplementedError

    def map_unordered(
        self, fn: Callable[[I], R], items: Iterable[I]
    ) -> Iterator[tuple[I, R | BaseException]]:
        """Run fn on every item, about 2×parallelism at a time, yielding (item, result | exception) as each ends.

        Closing the iterator early (break, or garbage collection) cancels what has not finished.
        """
        source = iter(items)
        window = max(1, 2 * self.parallelism)
        pending: dict[cf.Future[R], tuple[I, bool, int]] = {}  # future -> (item, alone?, pool generation)
        suspects: deque[I] = deque()  # caught in a pool break: each re-runs alone to see if it is the culprit
        exhausted = False
        try:
            while True:
                while suspects and not pending:
                    item = suspects.popleft()
                    pending[self.submit(fn, item)] = (item, True, self._generation)
                while not suspects and not exhausted and len(pending) < window:
                    try:
                        item = next(source)
                    except StopIteration:
                        exhausted = True
                        break
                    pending[self.submit(fn, item)] = (item, False, self._generation)
                if not pending:
                    return
                done, _ = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
                broke = False
                for future in done:
                    item, alone, generation = pending.pop(future)
                    exc = future.exception()
                    if exc is not None and self._pool_broken(exc):
                        broke = broke or generation == self._generation
                        if alone:
                            yield item, WorkerDied(f"worker process died while evaluating {item!r}")
                        else:
                            suspects.append(item)
                    else:
                        yield item, exc if exc is not None else future.result()
                if broke:
                    self._restart()
        finally:
            for future in pending:
                self._cancel(future)

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown(cancel=True)


class InlineExecutor(Executor):
    """Runs each call at submit time in the calling thread: for cheap evaluators (the model) and debugging."""

    parallelism = 1

    def submit(self, fn: Callable[..., R], *args: Any) -> cf.Future[R]:
        future: cf.Future[R] = cf.Future()
        try:
            future.set_result(fn(*args))
        except Exception as exc:  # noqa: BLE001 - delivered through the future, like a pool would
            future.set_exception(exc)
        return future

    def shutdown(self, cancel: bool = True) -> None:
        pass


def _worker_init(env: dict[str, str] | None = None) -> None:
    # The parent may be a language server speaking LSP on stdout: nothing a worker prints may reach it.
    os.environ.update(env or {})  # before the first task: jax and libtpu read it when they start
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    lifeline.hold_from_env()  # a forked worker imported nothing, so `import compiler` did not do it


END_GRACE = 30.0  # seconds the workers of a finished run may take to end on their own (a TPU runtime's teardown)


class LocalExecutor(Executor):
    """A pool of spawned processes: not forked, as the parent may hold threads, jax or a TPU. `fork`: the
    caller has run no torch computation (its thread pool does not survive a fork), so its workers are
    forks when it holds none of those and has torch imported already (compiler.support.forking): they skip that
    import."""

    def __init__(self, max_workers: int | None = None, fork: bool = False, env: dict[str, str] | None = None):
        self.parallelism = max_workers or os.cpu_count() or 1
        self._start = "fork" if fork and forks_with_torch() else "spawn"
        self._env = dict(env or {})  # set in each worker before its first task (a TPU chip pin: local_chips.py)
        self._pool = self._new_pool()

    def _new_pool(self) -> cf.ProcessPoolExecutor:
        return cf.ProcessPoolExecutor(
            max_workers=self.parallelism,
            mp_context=multiprocessing.get_context(self._start),
            initializer=_worker_init,
            initargs=(self._env,),
        )

    def submit(self, fn: Callable[..., R], *args: Any) -> cf.Future[R]:
        try:
            return self._pool.submit(fn, *args)
        except BrokenProcessPool:
            self._restart()
            return self._pool.submit(fn, *args)

    def _pool_broken(self, exc: BaseException) -> bool:
        return isinstance(exc, BrokenProcessPool)

    def _restart(self) -> None:
        self._terminate(self._pool)
        self._pool = self._new_pool()
        self._generation += 1

    @staticmethod
    def _terminate(pool: cf.ProcessPoolExecutor) -> None:
        # ProcessPoolExecutor cannot stop running work before Python 3.14 (terminate_workers), so stop the
        # processes themselves; _processes is its table of worker processes.
        processes = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        _stop(processes)

    def shutdown(self, cancel: bool = True) -> None:
        """cancel=False lets the workers end on their own (running work first), END_GRACE seconds at most: a
        worker that holds a TPU and is sent SIGTERM has libtpu's crash handler print a stack trace."""
        if cancel:
            self._terminate(self._pool)
            return
        processes = list((getattr(self._pool, "_processes", None) or {}).values())
        self._pool.shutdown(wait=False)
        deadline = time.monotonic() + END_GRACE
        for proc in processes:
            proc.join(max(0.0, deadline - time.monotonic()))
        _stop([proc for proc in processes if proc.is_alive()])  # the pool no longer lists them once shut down


def _stop(processes: list[Any]) -> None:
    """SIGTERM each process, then SIGKILL any still running 5 s later."""
    for proc in processes:
        proc.terminate()
    for proc in processes:
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join()


def _ray_invoke(fn: Callable[..., R], args: tuple[Any, ...]) -> R:
    return fn(*args)


def connect_ray(address: str | None) -> Any:
    """The ray module, connected: `address` None means RAY_ADDRESS if set, else a new local instance; an already
    connected Ray is reused (ExecutorError when it is another cluster than `address`)."""
    import ray

    if ray.is_initialized():
        current = ray.get_runtime_context().gcs_address
        if address not in (None, "auto", "local", current):
            raise ExecutorError(f"Ray is already connected to {current}, cannot also connect to {address}")
    elif address is None and "RAY_ADDRESS" not in os.environ:
        ray.init(address="local", include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=address, log_to_driver=False)
    return ray


def fitting(ray: Any, request: dict[str, float]) -> int:
    """How many tasks needing `request` the connected cluster runs at once (ExecutorError when none fits)."""
    available = ray.cluster_resources()
    missing = {name: need for name, need in request.items() if available.get(name, 0) < need}
    if missing:
        raise ExecutorError(f"the Ray cluster cannot run a task needing {missing} (it has {available})")
    return max(1, min(int(available[name] // need) for name, need in request.items() if need > 0))


class RayExecutor(Executor):
    """Ray tasks on a cluster: `address` None means RAY_ADDRESS if set, else a new local instance.

    Ray stays connected for the life of the process (starting it takes seconds) and shuts itself down at
    exit; an already connected Ray is reused. `resources` is what each task asks for, e.g. {"TPU": 1}
    ("CPU" defaults to 1).
    """

    def __init__(self, address: str | None = None, resources: dict[str, float] | None = None):
        ray = self._ray = connect_ray(address)
        request = {"CPU": 1.0, **(resources or {})}
        self.parallelism = fitting(ray, request)
        custom = {k: v for k, v in request.items() if k not in ("CPU", "GPU")}
        self._remote = ray.remote(_ray_invoke).options(
            num_cpus=request["CPU"], num_gpus=request.get("GPU", 0), resources=custom, max_retries=0
        )
        self._refs: dict[cf.Future[Any], Any] = {}

    def submit(self, fn: Callable[..., R], *args: Any) -> cf.Future[R]:
        ref = self._remote.remote(fn, args)
        inner = ref.future()
        outer: cf.Future[R] = cf.Future()
        self._refs[outer] = ref
        inner.add_done_callback(lambda f: self._settle(outer, f))
        return outer

    def _settle(self, outer: cf.Future[R], inner: cf.Future[R]) -> None:
        """Deliver the task's own exception, not Ray's wrapper, so callers see the same as with a local pool."""
        self._refs.pop(outer, None)
        if outer.done():
            return
        if inner.cancelled() or isinstance(inner.exception(), self._ray.exceptions.TaskCancelledError):
            outer.cancel()
            return
        exc = inner.exception()
        if exc is None:
            outer.set_result(inner.result())
        elif isinstance(exc, self._ray.exceptions.WorkerCrashedError):
            outer.set_exception(WorkerDied(str(exc)))
        elif isinstance(exc, self._ray.exceptions.RayTaskError) and isinstance(exc.cause, Exception):
            outer.set_exception(exc.cause)
        else:
            outer.set_exception(exc)

    def _cancel(self, future: cf.Future[Any]) -> None:
        future.cancel()  # first: Ray's reply to the cancel below may arrive (on its thread) at once
        ref = self._refs.pop(future, None)
        if ref is not None:
            self._ray.cancel(ref, force=True)

    def shutdown(self, cancel: bool = True) -> None:
        futures = list(self._refs)
        if cancel:
            for future in futures:
                self._cancel(future)
        else:
            cf.wait(futures)


def make_executor(spec: str, resources: dict[str, float] | None = None, fork: bool = False) -> Executor:
    """An executor from a spec: "inline", "local" (one worker per CPU), "local:N", "ray", "ray:ADDRESS".

    `resources` is each evaluation's need. The local pool honours "CPU" (workers = CPUs / need) and "TPU"
    (one worker: a process holds the TPU exclusively); Ray passes the request to its scheduler. `fork`: see
    LocalExecutor.
    """
    kind, _, arg = spec.partition(":")
    if kind == "inline" and not arg:
        return InlineExecutor()
    if kind == "local":
        unknown = set(resources or {}) - {"CPU", "TPU"}
        if unknown:
            raise ExecutorError(f"the local executor cannot provide {sorted(unknown)}; use ray")
        if arg:
            if not arg.isdigit() or int(arg) < 1:
                raise ExecutorError(f"local:N needs a positive worker count, not {arg!r}")
            workers = int(arg)
        elif resources and resources.get("TPU"):
            workers = 1
        else:
            workers = max(1, int((os.cpu_count() or 1) // (resources or {}).get("CPU", 1)))
        return LocalExecutor(workers, fork)
    if kind == "ray":
        return RayExecutor(arg or None, resources)
    raise ExecutorError(f"unknown executor {spec!r}: use inline, local, local:N, ray or ray:ADDRESS")
