"""The eager reference in a separate process with resource limits: it runs the user's code.

`ReferenceProcess` owns one worker (started by `start()` or on first use, reused by later runs): a spawned
interpreter, or — `start(fork=True)` from a process that has torch but no jax and no other thread, such as
the tuner's fresh gate worker — a fork of the caller, which has torch without importing it again. The worker limits
its own address space (RLIMIT_AS) and CPU time (RLIMIT_CPU), dies with the process that started it, and
runs only what the kernel needs (`load_module(..., kernel=...)`, see prune.py). Each `run` also has a
wall-clock limit: a worker that exceeds it is killed and the next run starts a fresh one. Whatever goes
wrong (an exception in the kernel, the memory limit, a crash, the time limit) comes back as
`ReferenceRunError`. Inputs and results cross the pipe as plain pickles (tensors with their storage) —
or, for the random inputs of a correctness check, as `Drawn` (specs and seed: the worker draws the same
tensors itself), and only the arguments the caller asks back (`send_back`) return: pickling tens of MB
each way cost a check more than its kernel. `begin` sends a run and returns at once, so the caller can run
its own side of a comparison meanwhile.
"""

from __future__ import annotations

import gc
import io
import multiprocessing
import os
import pickle
import resource
import signal
import sys
import traceback
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, NoReturn

from compiler.reference.errors import ReferenceRunError
from compiler.reference.inputs import Drawn
from compiler.support.forking import forks_with_torch

TIME_LIMIT = 300.0  # seconds of wall clock per run
START_LIMIT = 120.0  # seconds for a fresh worker to import torch and answer
EXACT_DOTS = "kernel with exact dots"  # the request kind of a run whose float products are summed in f64


def default_memory_limit() -> int:
    """Half of the machine's memory (at least 2 GiB): enough for any reduced-shape run, never all of it."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 8 << 30
    return max(2 << 30, total // 2)


def _limit(kind: int, value: int) -> None:
    _, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, hard))


def _serve(conn: Any, parent: int, memory_bytes: int, cpu_seconds: int, threads: int | None = None) -> None:
    """The worker: limits first, then one request after another until the pipe closes."""
    from compiler.support.lifeline import die_with_parent

    die_with_parent(parent)
    os.dup2(2, 1)  # the parent may speak a protocol on stdout
    _limit(resource.RLIMIT_AS, memory_bytes)
    _limit(resource.RLIMIT_CPU, cpu_seconds)
    gc.disable()  # torch's import: collections scanning its objects meanwhile would only slow it down
    from compiler.reference.runner import load_module

    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    gc.freeze()  # and they stay out of every later collection
    gc.enable()
    conn.send_bytes(b"ready")
    while True:
        try:
            kind, source, filename, kernel, args, block_sizes, tunables, send_back = pickle.loads(conn.recv_bytes())
        except EOFError:
            return
        try:
            if isinstance(args, Drawn):
                args = args.values()
            if kind in ("kernel", EXACT_DOTS):
                result = load_module(source, filename, kernel=kernel).run(kernel, args, block_sizes, tunables,
                                                                          exact_dots=kind == EXACT_DOTS)
            else:  # a plain function of the file (its torch `reference`)
                result = load_module(source, filename, function=kernel).namespace[kernel](*args)
            reply: tuple = ("ok", result, [a if send_back is None or i in send_back else None
                                           for i, a in enumerate(args)])
        except ReferenceRunError as exc:
            reply = ("error", exc.message, exc.line, exc.kernel)
        except MemoryError:
            reply = ("error", f"the eager reference ran out of its memory limit ({memory_bytes >> 20} MiB)", None, kernel)
        except BaseException as exc:  # noqa: BLE001 - anything else is reported, never a dead worker
            reply = ("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}", None, kernel)
        try:
            payload = _dumps(reply)
        except Exception as exc:  # noqa: BLE001 - a result that cannot cross the pipe
            payload = _dumps(("error", f"the kernel's result cannot be sent back: {exc}", None, kernel))
        conn.send_bytes(payload)


Args = Sequence[Any] | Drawn  # values, or what to draw them from (the worker draws the caller's own values)


class _Pickler(pickle.Pickler):
    """Float8 tensors travel as their bytes: torch 2.13 pickles them but cannot unpickle them ("UntypedStorage
    has no attribute 'dtype'"), which killed the reference process on an fp8 kernel's inputs."""

    def reducer_override(self, obj: Any) -> Any:
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(obj, torch.Tensor) and obj.dtype.itemsize == 1 \
                and obj.dtype.is_floating_point:
            # viewed, not made contiguous: a transposed argument (`b.t()`) keeps its strides for the kernel's asserts
            return _float8, (obj.view(torch.uint8), str(obj.dtype).removeprefix("torch."))
        return NotImplemented


def _float8(raw: Any, dtype: str) -> Any:
    import torch

    return raw.view(getattr(torch, dtype))


def _dumps(value: Any) -> bytes:
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return buffer.getvalue()


def _death(code: int | None) -> str:
    if code == -signal.SIGXCPU:
        return "it used up its CPU time limit"
    if code is not None and code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


class ReferenceProcess:
    """`run(source, kernel, args, block_sizes)` in a resource-limited worker; `close()` ends the worker."""

    def __init__(self, time_limit: float = TIME_LIMIT, memory_bytes: int | None = None, threads: int | None = None):
        self.time_limit = time_limit
        self.memory_bytes = memory_bytes or default_memory_limit()
        self.threads = threads  # torch's intra-op threads in the worker (None: torch's default)
        self._proc: Any = None
        self._conn: Any = None
        self._ready = False  # the worker said it is ready

    def start(self, fork: bool = False) -> None:
        """Start the worker now without waiting for it (a spawned one's torch import then runs while the
        caller does other work); the first run waits until it is ready. `fork`: fork this process instead
        when that is safe (`forks_with_torch`) — the caller says it has run no torch computation (whose thread pool
        a fork would not carry over); a worker restarted later is spawned."""
        if self._proc is None or not self._proc.is_alive():
            self.close()
            ctx = multiprocessing.get_context("fork" if fork and forks_with_torch() else "spawn")
            parent_conn, child_conn = ctx.Pipe()
            cpu = int(self.time_limit) + 60
            self._proc = ctx.Process(
                target=_serve, args=(child_conn, os.getpid(), self.memory_bytes, cpu, self.threads), name="helion-reference",
                daemon=True,
            )
            self._proc.start()
            child_conn.close()
            self._conn = parent_conn
            self._ready = False

    def _wait_ready(self) -> None:
        if self._ready:
            return
        if not self._conn.poll(START_LIMIT):
            self.close()
            raise ReferenceRunError(f"the eager reference process did not start within {START_LIMIT:.0f} s")
        try:
            self._conn.recv_bytes()
        except EOFError:
            code = self._proc.exitcode
            self.close()
            raise ReferenceRunError(f"the eager reference process exited while starting (code {code})") from None
        self._ready = True

    def run(
        self,
        source: str,
        kernel: str,
        args: Args,
        block_sizes: Sequence[int] | None = None,
        filename: str = "<helion kernel source>",
        send_back: Collection[int] | None = None,
        tunables: Mapping[str, Any] | None = None,
        exact_dots: bool = False,
    ) -> tuple[Any, list[Any]]:
        """(the kernel's result, the arguments after the call: in-place kernels write into them; with
        `send_back`, only the arguments at those positions, None for the others). `tunables`: the config whose
        hl.register_tunable values the kernel reads (the compiled one's). `exact_dots`: every float product
        summed in f64 (reference/matmul_mode.py)."""
        kind = EXACT_DOTS if exact_dots else "kernel"
        return self._request(kind, source, kernel, args, block_sizes, filename, send_back, tunables)

    def begin(
        self,
        source: str,
        kernel: str,
        args: Args,
        block_sizes: Sequence[int] | None = None,
        filename: str = "<helion kernel source>",
        send_back: Collection[int] | None = None,
        tunables: Mapping[str, Any] | None = None,
    ) -> Callable[[], tuple[Any, list[Any]]]:
        """`run`, sent now: returns at once with a function that waits for the result (or raises the
        ReferenceRunError). Call that function, once, before the next request: replies come in order."""
        try:
            self._send("kernel", source, kernel, args, block_sizes, filename, send_back, tunables)
        except ReferenceRunError as exc:
            failure = exc

            def failed() -> tuple[Any, list[Any]]:
                raise failure

            return failed
        return lambda: self._receive(kernel)

    def call(self, source: str, function: str, args: Sequence[Any],
             filename: str = "<helion kernel source>") -> tuple[Any, list[Any]]:
        """Call a plain function of the file (with only what it needs): (its result, the arguments after)."""
        return self._request("function", source, function, args, None, filename)

    def _request(self, kind: str, source: str, kernel: str, args: Args, block_sizes: Sequence[int] | None,
                 filename: str, send_back: Collection[int] | None = None,
                 tunables: Mapping[str, Any] | None = None) -> tuple[Any, list[Any]]:
        self._send(kind, source, kernel, args, block_sizes, filename, send_back, tunables)
        return self._receive(kernel)

    def _send(self, kind: str, source: str, kernel: str, args: Args, block_sizes: Sequence[int] | None,
              filename: str, send_back: Collection[int] | None = None, tunables: Mapping[str, Any] | None = None) -> None:
        self.start()
        self._wait_ready()
        request = _dumps((kind, source, filename, kernel, args if isinstance(args, Drawn) else list(args),
                                list(block_sizes) if block_sizes else None, None if tunables is None else dict(tunables),
                                None if send_back is None else frozenset(send_back)))
        try:
            self._conn.send_bytes(request)
        except OSError:
            self._died(kernel)

    def _died(self, kernel: str) -> NoReturn:
        code = self._proc.exitcode if self._proc is not None else None
        self.close()
        raise ReferenceRunError(f"the eager reference process died ({_death(code)})", kernel=kernel) from None

    def _receive(self, kernel: str) -> tuple[Any, list[Any]]:
        try:
            if not self._conn.poll(self.time_limit):
                self.close()
                raise ReferenceRunError(
                    f"the eager reference did not finish within {self.time_limit:.0f} s and was stopped", kernel=kernel
                )
            reply = pickle.loads(self._conn.recv_bytes())
        except (EOFError, OSError):
            self._died(kernel)
        if reply[0] == "ok":
            return reply[1], reply[2]
        _, message, line, name = reply
        raise ReferenceRunError(message, line, name)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._proc is not None:
            if self._proc.is_alive():
                self._proc.kill()
            self._proc.join(5)
            self._proc = None

    def __enter__(self) -> ReferenceProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
