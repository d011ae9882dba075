"""Event-loop health: how late a periodic tick wakes up is how long the loop was blocked.

Answered through the `helion/stats` request, so a benchmark (or a curious user) can check the promise
that compiles and tuning never block the loop, and see the server's memory.
"""

from __future__ import annotations

import asyncio
import os
import resource
import time

TICK = 0.01  # seconds


class LoopMonitor:
    def __init__(self) -> None:
        self.max_lag = 0.0
        self.lags: list[float] = []  # recent lags above 5 ms, seconds
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            start = loop.time()
            await asyncio.sleep(TICK)
            lag = loop.time() - start - TICK
            if lag > 0.005:
                self.lags = [*self.lags[-999:], lag]
            self.max_lag = max(self.max_lag, lag)

    def reset(self) -> None:
        self.max_lag = 0.0
        self.lags = []

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def stats(self) -> dict:
        return {
            "maxLoopLagMs": round(self.max_lag * 1000, 2),
            "slowTicks": len(self.lags),
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
