"""End to end: tuning progress for a client that shows it itself (initializationOptions
clientShowsTuningProgress, as the VS Code client sends): helion/tuningState carries the phase, code lenses
show the tuner's live state while it runs, the server makes no $/progress of its own, and the final
message still comes.

The tuner runs in short slices and is paused (SIGSTOP) between them, so the lens request that follows must
show exactly the state that notification reported, however fast the tuner would otherwise move on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_ls_support import (
    attr,
    end_session,
    make_workspace,
    open_doc,
    rec,
    request,
    server_config,
    stage_diagnostics,
    start,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")
FINAL = ("done", "failed", "cancelled", "stale")


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    ws = make_workspace(tmp_path_factory.mktemp("progress"))
    lsp_client.ws = ws
    await start(
        lsp_client,
        ws,
        libtpu=False,
        executor="inline",
        tuneMaxEvals=500,  # inline model evaluations: about a second of search; counts are told with each lens refresh
        clientShowsTuningProgress=True,
    )
    yield
    await end_session(lsp_client)


def notes(client: LanguageClient, uri: str) -> list:
    return [p for p in rec(client).of("helion/tuningState") if attr(p, "uri") == uri]


async def tuner_lens(client: LanguageClient, uri: str) -> str:
    """The title of the tuning lens of shape set 0 (the second lens on its args line)."""
    found = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    line = found[0].range.start.line
    return [lens.command.title for lens in found if lens.range.start.line == line][1]


async def follow_refreshes(client: LanguageClient, uri: str, seen: list[str], stop: asyncio.Event) -> None:
    """Fetch lenses after every refresh, as an editor does; record the tuning lens each time."""
    count = rec(client).refreshes
    while True:
        await rec(client).wait(lambda count=count: stop.is_set() or rec(client).refreshes > count, 120)
        if stop.is_set():
            return
        count = rec(client).refreshes
        seen.append(await tuner_lens(client, uri))


async def paused_lens(client: LanguageClient, uri: str, pid: int) -> tuple[object, str]:
    """Pause the tuner, let what it already wrote arrive, then: the latest notification and the lens."""
    os.kill(pid, signal.SIGSTOP)
    try:
        await asyncio.sleep(0.5)
        return notes(client, uri)[-1], await tuner_lens(client, uri)
    finally:
        os.kill(pid, signal.SIGCONT)


async def step_until(client: LanguageClient, pid: int, predicate, slice_seconds, wait_seconds,
                     limit: float = 90.0) -> None:
    """Let the tuner run in short slices (`slice_seconds()` long), pausing it after each until what it
    reported has arrived (at most `wait_seconds()`), until `predicate` holds; the tuner is left paused.
    (Its whole search takes well under a second of CPU and counts are told with lens refreshes, which wait
    for the client's previous lens fetch: a tuner let go on before its count was told could finish the
    search before any count reached the client.)"""
    deadline = asyncio.get_running_loop().time() + limit
    os.kill(pid, signal.SIGSTOP)
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "the condition did not come about"
        os.kill(pid, signal.SIGCONT)
        await asyncio.sleep(slice_seconds())
        os.kill(pid, signal.SIGSTOP)
        with contextlib.suppress(TimeoutError):  # a count is told with the next lens refresh
            await rec(client).wait(predicate, wait_seconds())


async def test_lenses_show_the_live_state_and_the_server_makes_no_progress_of_its_own(client):
    path = client.ws / "attention.py"
    uri = open_doc(client, path)
    await stage_diagnostics(client, uri, 1, "front")
    seen: list[str] = []
    stop = asyncio.Event()
    editor = asyncio.ensure_future(follow_refreshes(client, uri, seen, stop))
    await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="helion.tune", arguments=[{"uri": uri, "kernel": "attention", "shapeSet": 0}]
        )
    )
    await rec(client).wait(lambda: any(attr(p, "state") == "running" for p in notes(client, uri)), 60)
    stats = await request(client, "helion/stats", {})
    pid = next(t["pid"] for t in stats["tuners"] if t["kernel"] == "attention")

    # searching: pause at a report of some (not all) configs evaluated
    def searching():
        return any(
            attr(p, "phase") == "searching" and 0 < attr(p, "evaluated") < attr(p, "total")
            for p in notes(client, uri)
        )

    def counting():  # the tuner's imports are done: its first count (maybe 0) has been told
        return any(attr(p, "title") not in ("Tuning queued…", "Tuning… starting the tuner") for p in notes(client, uri))

    # until the first count, short waits (the tuner is importing: nothing to tell); then tiny slices and
    # long enough waits for each slice's count to be told
    await step_until(client, pid, searching, lambda: 0.02 if counting() else 0.1, lambda: 2.0 if counting() else 0.5)
    try:
        note, title = notes(client, uri)[-1], await tuner_lens(client, uri)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert attr(note, "phase") == "searching" and attr(note, "evaluated") > 0, note
    assert title == f"Tuning… {attr(note, 'evaluated')}/{attr(note, 'total')} (cancel)"
    assert title == f"{attr(note, 'title')} (cancel)"  # the client's notification shows the lens's words

    # verifying: the correctness gate on the winner
    await rec(client).wait(lambda: attr(notes(client, uri)[-1], "phase") == "verifying", 120)
    note, title = await paused_lens(client, uri, pid)
    assert (attr(note, "state"), attr(note, "phase")) == ("running", "verifying")
    assert title == f"Verifying the best of {attr(note, 'evaluated')}… (cancel)" == f"{attr(note, 'title')} (cancel)"

    # refreshes came during the run, and the lenses fetched after them showed progress
    assert seen[0] == "Tuning queued… (cancel)" or seen[0].startswith("Tuning… "), seen
    assert any(re.fullmatch(r"Tuning… [1-9]\d*/500 \(cancel\)", t) for t in seen), seen
    # before the tuner's first count (its imports take seconds) the lens says it is starting, never a bare 0
    running = [p for p in notes(client, uri) if attr(p, "state") == "running"]
    assert attr(running[0], "title") == "Tuning… starting the tuner", running[0]
    assert not [t for t in seen if re.fullmatch(r"Tuning… 0 \(cancel\)", t)], seen

    done = await rec(client).wait(  # the gate checks the winner and asks libtpu about it at the real shapes:
        lambda: next((p for p in notes(client, uri) if attr(p, "state") in FINAL), None), 300  # minutes under load
    )
    assert attr(done, "state") == "done" and attr(done, "phase") is None, done
    phases = [attr(p, "phase") for p in notes(client, uri)]
    first_verifying = phases.index("verifying")
    assert phases[0] is None and set(phases[1:first_verifying]) == {"searching"}
    assert set(phases[first_verifying:-1]) == {"verifying"} and phases[-1] is None

    # no work-done progress from the server, but still the final message; no complaint about the option
    assert not [t for t in client.progress_reports if str(t).startswith("helion-tune-")]
    await rec(client).wait(
        lambda: any("Tuned attention (shape set 0) [model estimate for v7x]" in m.message for m in client.messages), 5
    )
    assert not [m.message for m in client.messages if "clientShowsTuningProgress" in m.message]
    assert (await tuner_lens(client, uri)).startswith("Best: ")
    stop.set()
    await editor
