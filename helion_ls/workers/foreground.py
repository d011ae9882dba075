"""Work the user is waiting for goes first: background work waits while a tuning the user started runs.

A tuner (its process, and its gate worker importing torch and jax) keeps two cores busy by itself. The
server's own background work started meanwhile — a second compile worker's imports, the check worker's
imports and its lowering and libtpu checks, the confirming compile of remembered results — took the other
half of the machine and nearly doubled the wait for the Best lens of a tune started at a cold open. The
front stage (the diagnostics the user sees first) does not wait.

Waiting, not a lower priority: the workers each run in a session of their own, and where the kernel groups
scheduling by session (Linux autogroup, the desktop default) a nice value counts only inside that session.

`Foreground` counts the foreground jobs running (`running()` around each). `idle()` returns once none has
run for `grace` seconds (the next shape set's Tune, clicked when the last Best lens appeared, still goes
first), or once foreground work has kept the machine `limit` seconds: a long tuning (or a file's worth of
them) delays background work, never starves it. The limit counts from the start of a stretch of tunings one
after another, so it is long enough for both shape sets of a kernel on a busy machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator

log = logging.getLogger(__name__)

DEFER_LIMIT = 60.0  # seconds of foreground work after which background work runs beside it
GRACE = 2.0  # seconds background work still waits after the last foreground job ended


class Foreground:
    def __init__(self, limit: float = DEFER_LIMIT, grace: float = GRACE):
        self.limit = limit
        self.grace = grace
        self.jobs = 0  # foreground jobs running now
        self.waiting: list[str] = []  # what background work waits now (helion/stats)
        self._since = 0.0  # when the current stretch of foreground work began (time.monotonic)
        self._ended = -grace  # when the last foreground job ended
        self._idle = asyncio.Event()  # set while none runs (an asyncio.Event binds no loop until awaited)
        self._idle.set()

    @property
    def busy(self) -> bool:
        return self.jobs > 0

    @property
    def holding(self) -> bool:
        """Background work asking now would wait (a job runs, or one ended within the grace)."""
        return self._delay() > 0.0

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """A foreground job runs inside this block."""
        if self._delay() == 0.0 and not self.busy:
            self._since = time.monotonic()  # a new stretch (a job starting within the grace continues one)
        self.jobs += 1
        self._idle.clear()
        try:
            yield
        finally:
            self.jobs -= 1
            if self.jobs == 0:
                self._ended = time.monotonic()
                self._idle.set()

    def _delay(self) -> float:
        """Seconds background work should still wait; 0: it may run."""
        now = time.monotonic()
        until = self._since + self.limit
        if not self.busy:
            until = min(until, self._ended + self.grace)
        return max(0.0, until - now)

    async def idle(self, what: str = "background work") -> None:
        """Return when background work may run (see the module's docstring)."""
        if not self.holding:
            return
        log.debug("%s waits for %d foreground job(s)", what, self.jobs)
        self.waiting.append(what)
        try:
            while (delay := self._delay()) > 0.0:
                if self.busy:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._idle.wait(), delay)
                else:
                    await asyncio.sleep(delay)
        finally:
            self.waiting.remove(what)
