"""Code-lens refresh pacing against an editor that debounces the way VS Code does.

VS Code restarts a timer (the mean duration of its recent lens requests, at least 250 ms) on every
workspace/codeLens/refresh and fetches lenses when it fires. `Editor` below does exactly that; with a
state that changes every 50 ms (a tuner reporting progress) it must still get fresh lenses regularly.
"""

from __future__ import annotations

import asyncio

from helion_ls.wire.pacing import RefreshPacer


class Editor:
    """Answers refreshes like VS Code's code-lens controller: (re)start the debounce timer, then fetch."""

    def __init__(self, debounce: float, fetch_seconds: float, state: list[int]):
        self.debounce = debounce
        self.fetch_seconds = fetch_seconds
        self.state = state
        self.refreshes = 0
        self.shown: list[int] = []  # the state each completed fetch returned
        self.pacer: RefreshPacer | None = None
        self._timer: asyncio.TimerHandle | None = None

    async def refresh(self) -> bool:
        self.refreshes += 1
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(self.debounce, self._fire)
        return True

    def _fire(self) -> None:
        asyncio.ensure_future(self._fetch())

    async def _fetch(self) -> None:
        assert self.pacer is not None
        token = self.pacer.fetch_started()
        await asyncio.sleep(self.fetch_seconds)  # the server computing lenses
        self.shown.append(self.state[0])  # read when answered, as the lens provider does
        self.pacer.fetch_done(token)


async def changing(pacer: RefreshPacer, state: list[int], seconds: float, every: float) -> None:
    for _ in range(int(seconds / every)):
        state[0] += 1
        pacer.changed()
        await asyncio.sleep(every)


async def test_an_editor_with_a_slow_debounce_still_sees_progress():
    state = [0]
    editor = Editor(debounce=0.6, fetch_seconds=0.05, state=state)
    editor.pacer = RefreshPacer(editor.refresh, min_interval=0.1, ack_timeout=5.0)
    await changing(editor.pacer, state, seconds=4.0, every=0.05)
    # a fetch every ~0.65 s while the state kept changing, each newer than the last
    assert len(editor.shown) >= 4, editor.shown
    assert editor.shown == sorted(set(editor.shown))
    assert state[0] - editor.shown[-1] <= 20  # the last fetch is about one cycle old at most
    # the change at the end reaches the editor too
    await asyncio.sleep(2.0)
    assert editor.shown[-1] == state[0]


async def test_refreshes_go_on_when_nobody_fetches_and_stop_when_nothing_changes():
    sent: list[float] = []

    async def send() -> bool:
        sent.append(asyncio.get_running_loop().time())
        return True

    pacer = RefreshPacer(send, min_interval=0.05, ack_timeout=0.3)
    state = [0]
    await changing(pacer, state, seconds=1.5, every=0.05)
    assert 3 <= len(sent) <= 7, sent  # first at once, then one per ack_timeout without fetches
    assert all(b - a >= 0.3 for a, b in zip(sent, sent[1:], strict=False))
    await asyncio.sleep(0.5)
    count = len(sent)
    await asyncio.sleep(0.7)
    assert len(sent) == count  # idle: nothing changed, nothing sent


async def test_a_client_that_cannot_refresh_does_not_hold_changes_back():
    calls = 0

    async def send() -> bool:
        nonlocal calls
        calls += 1
        return False  # no refresh support: no fetch will follow, and none is waited for

    pacer = RefreshPacer(send, min_interval=0.05, ack_timeout=10.0)
    for _ in range(3):
        pacer.changed()
        await asyncio.sleep(0.15)
    assert calls == 3


async def test_a_fetch_that_overtakes_the_refresh_answer_still_counts():
    """A client may send its lens request before its answer to the refresh reaches the server (the test
    client does; pipes do not order the two): that fetch read the state the refresh was about, so the
    next refresh must not wait out the acknowledgement timeout."""
    state = [0]
    sent: list[float] = []
    pacer: RefreshPacer | None = None

    async def send() -> bool:
        sent.append(asyncio.get_running_loop().time())
        token = pacer.fetch_started()  # the fetch starts and ends before the answer arrives
        await asyncio.sleep(0.01)
        pacer.fetch_done(token)
        await asyncio.sleep(0.05)
        return True

    pacer = RefreshPacer(send, min_interval=0.05, ack_timeout=5.0)
    await changing(pacer, state, seconds=1.0, every=0.05)
    assert len(sent) >= 5, sent  # about one per 0.1 s, not one per ack_timeout


class CancellingEditor(Editor):
    """VS Code's controller also cancels the lens request still in flight when its timer fires again (the
    client then tells the server, which stops answering it)."""

    def __init__(self, debounce: float, fetch_seconds: float, state: list[int]):
        super().__init__(debounce, fetch_seconds, state)
        self._fetching: asyncio.Future | None = None
        self.cancelled = 0

    def _fire(self) -> None:
        if self._fetching is not None and not self._fetching.done():
            self._fetching.cancel()
            self.cancelled += 1
        self._fetching = asyncio.ensure_future(self._fetch())

    async def _fetch(self) -> None:
        assert self.pacer is not None
        token = self.pacer.fetch_started()
        answered = False
        try:
            await asyncio.sleep(self.fetch_seconds)
            self.shown.append(self.state[0])
            answered = True
        finally:
            self.pacer.fetch_done(token, answered)


async def test_a_fetch_slower_than_the_acknowledgement_timeout_is_not_interrupted():
    """Lens fetches that take longer than `ack_timeout` (a busy machine during a big tuning) must still reach
    the editor: a refresh sent while one is in flight would make the editor cancel it, every time (issue 42:
    the lens stayed at 'Tuning… 0/14112' while the status bar, told by notification, said 124/14112)."""
    state = [0]
    editor = CancellingEditor(debounce=0.25, fetch_seconds=1.0, state=state)
    editor.pacer = RefreshPacer(editor.refresh, min_interval=0.05, ack_timeout=0.4, fetch_timeout=10.0)
    await changing(editor.pacer, state, seconds=5.0, every=0.05)
    assert len(editor.shown) >= 3, (editor.shown, editor.cancelled)
    assert editor.cancelled == 0
    await asyncio.sleep(3.0)
    assert editor.shown[-1] == state[0]
