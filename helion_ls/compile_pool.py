"""Runs the compiler's first stage (front end, codegen, VMEM) off the event loop, once per distinct unit.

Threads are enough here: `compiler.load` and `Kernel.compile` never execute user code. Identical units
(same `CompileKey`) share one in-flight future and one cached result, so an unchanged kernel costs
nothing on the next save. A compile that raises anything is turned into diagnostics by the caller's
function; one that does not return within `timeout` is abandoned with its thread pool (threads cannot be
killed) and a fresh pool takes over, so one runaway kernel never starves the others.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class LruCache(Generic[T]):
    def __init__(self, size: int):
        self.size = size
        self._items: OrderedDict[Hashable, T] = OrderedDict()

    def get(self, key: Hashable) -> T | None:
        item = self._items.get(key)
        if item is not None:
            self._items.move_to_end(key)
        return item

    def put(self, key: Hashable, value: T) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def pop(self, key: Hashable) -> None:
        self._items.pop(key, None)

    def __len__(self) -> int:
        return len(self._items)


class CompilePool:
    def __init__(self, workers: int = 2, timeout: float = 60.0):
        self.workers = workers
        self.timeout = timeout
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix="helion-compile")
        self._inflight: dict[Hashable, asyncio.Future] = {}
        self._quick = ThreadPoolExecutor(1, thread_name_prefix="helion-quick")
        self.submitted = 0  # compiles actually started (cache and in-flight hits excluded)

    async def run(self, key: Hashable, fn: Callable[[], T], on_timeout: Callable[[], T]) -> T:
        """`fn()` in a worker thread, deduplicated by `key` with other callers in flight."""
        fut = self._inflight.get(key)
        if fut is None:
            loop = asyncio.get_running_loop()
            fut = loop.run_in_executor(self._executor, fn)
            self.submitted += 1
            self._inflight[key] = fut
            fut.add_done_callback(lambda _f, k=key: self._inflight.pop(k, None))
        try:
            return await asyncio.wait_for(asyncio.shield(fut), self.timeout)
        except TimeoutError:
            log.error("compile of %s exceeded %.0f s; abandoning its thread", key, self.timeout)
            self._inflight.pop(key, None)
            self._replace_executor()
            return on_timeout()

    def _replace_executor(self) -> None:
        old = self._executor
        self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="helion-compile")
        old.shutdown(wait=False)  # queued units still run there; only the stuck thread is lost

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """A short blocking call (loading a module, reading the store) off the loop, never behind compiles."""
        return await asyncio.get_running_loop().run_in_executor(self._quick, fn, *args)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._quick.shutdown(wait=False, cancel_futures=True)
