"""Event-loop health: how late a periodic tick wakes up is how long the loop was blocked.

Answered through the `helion/stats` request, so a benchmark (or a curious user) can check the promise
that compiles and tuning never block the loop, and see the server's memory.
"""

from __future__ import annotations

import asyncio
import gc
import os
import resource
import time

TICK = 0.01  # seconds
COLLECT_DELAY = 0.1  # seconds from finished work to the full garbage collection that frees its garbage


class LoopMonitor:
    def __init__(self) -> None:
        self.max_lag = 0.0
        self.lags: list[float] = []  # recent lags above 5 ms, seconds
        self._task: asyncio.Task | None = None
        self.max_gc_pause = 0.0  # garbage collections stop every thread, the loop included
        self.max_gc_generation: int | None = None
        self._collect: asyncio.TimerHandle | None = None
        self._gc_start = 0.0

    def _gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        else:
            pause = time.perf_counter() - self._gc_start
            if pause > self.max_gc_pause:
                self.max_gc_pause, self.max_gc_generation = pause, info.get("generation")

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run())
            gc.callbacks.append(self._gc)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            start = loop.time()
            await asyncio.sleep(TICK)
            lag = loop.time() - start - TICK
            if lag > 0.005:
                self.lags = [*self.lags[-999:], lag]
            self.max_lag = max(self.max_lag, lag)

    def collect_soon(self) -> None:
        """A full collection shortly after work (at most one per COLLECT_DELAY, however busy).

        The compiler's results are cyclic (module <-> kernel), so each analysed version leaves garbage
        that only a full pass frees. Collected a version at a time each pass is short (~10 ms); left to
        the automatic schedule, versions pile up and one pass stopped the event loop for ~200 ms.
        """
        if self._collect is None:  # a pass is already due: it will take this work's garbage too
            self._collect = asyncio.get_running_loop().call_later(COLLECT_DELAY, self._full_collect)

    def _full_collect(self) -> None:
        self._collect = None
        gc.collect()

    def reset(self) -> None:
        self.max_lag = 0.0
        self.max_gc_pause = 0.0
        self.lags = []

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._gc in gc.callbacks:
            gc.callbacks.remove(self._gc)

    def stats(self) -> dict:
        return {
            "pid": os.getpid(),
            "maxLoopLagMs": round(self.max_lag * 1000, 2),
            "slowTicks": len(self.lags),
            "maxGcPauseMs": round(self.max_gc_pause * 1000, 2),
            "maxGcPauseGeneration": self.max_gc_generation,
            "rssBytes": _rss_bytes(),
            "peakRssBytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "time": time.time(),
        }


def _rss_bytes() -> int:
    try:
        with open(f"/proc/{os.getpid()}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
