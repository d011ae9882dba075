"""Pacing of workspace/codeLens/refresh: never a second refresh before the client acted on the first.

VS Code answers a refresh by restarting a timer (the mean duration of its recent lens requests, at least
250 ms) and requests lenses when the timer fires; a refresh arriving before that restarts the timer. A
server that refreshes on a fixed clock faster than that timer starves the editor: its lenses freeze while
what they show changes several times a second (a tuner's progress). So after a refresh the next one waits
until the client fetched lenses (a request that started after the refresh was sent, and completed: it read
the state the refresh was about, even when it reached the server before the client's answer did),
or until `ack_timeout` passed (no editor shows lenses, or the client ignores refreshes), and never comes
sooner than `min_interval` after the previous one. A fetch the client started for the latest refresh and
that is still being answered is waited for (up to `fetch_timeout`) rather than interrupted: VS Code
cancels a lens request in flight when a new refresh comes, so refreshing past a slow fetch (a busy machine,
a big tuning) would throw each fetch away and the lenses would stop moving while the status bar, told by
notification, goes on. Lens requests read the live state, so whatever changed
meanwhile is in the next fetch; `before_send` lets a feature tell the client, at the same moment, what the
lenses fetched after this refresh will show (tuning counts). Knows nothing about LSP: `send` does the request.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable


class RefreshPacer:
    def __init__(
        self, send: Callable[[], Awaitable[bool]], min_interval: float = 0.25, ack_timeout: float = 5.0,
        fetch_timeout: float = 30.0,
    ):
        """`send()` asks the client to refresh and says whether it did (False: it cannot or failed)."""
        self._send = send
        self.min_interval = min_interval
        self.ack_timeout = ack_timeout
        self.fetch_timeout = fetch_timeout
        self._asked = 0  # refreshes sent (answered or not): a fetch started after the latest acts on it
        self._answering: dict[int, int] = {}  # fetches being answered, by the refresh count they started at
        self._wanted = False
        self._fetched = asyncio.Event()  # the client fetched lenses since the last refresh
        self._fetched.set()
        self._task: asyncio.Task | None = None
        self.before_send: Callable[[], None] | None = None  # runs right before each refresh is sent

    def changed(self) -> None:
        """Something the lenses show changed: refresh as soon as the pacing allows."""
        self._wanted = True
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())

    def fetch_started(self) -> int:
        """Call when a lens request starts; pass the result to `fetch_done` when it ended (answered or not)."""
        self._answering[self._asked] = self._answering.get(self._asked, 0) + 1
        return self._asked

    def fetch_done(self, token: int, answered: bool = True) -> None:
        left = self._answering.get(token, 0) - 1
        if left > 0:
            self._answering[token] = left
        else:
            self._answering.pop(token, None)
        if answered and token == self._asked:  # started after the latest refresh was sent: the client acted on it
            self._fetched.set()

    async def _run(self) -> None:
        while self._wanted:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._fetched.wait(), self.ack_timeout)
            if not self._fetched.is_set() and self._answering.get(self._asked):  # slow, not ignored: let it end
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._fetched.wait(), self.fetch_timeout)
            self._wanted = False
            if self.before_send is not None:
                self.before_send()
            self._fetched.clear()  # before sending: the client may fetch before its answer arrives here
            self._asked += 1
            if not await self._send():
                self._fetched.set()  # no refresh went out: no fetch to wait for
            await asyncio.sleep(self.min_interval)
