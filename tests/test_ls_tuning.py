"""End to end: lens -> tune (real `helion-pallas tune` subprocess, model evaluator) -> progress -> refreshed lens
-> Apply -> exact text; cancel from the client's progress and by command; a killed tuner; a stale run."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_ls_support import (
    attr,
    change_doc,
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
    ws = make_workspace(tmp_path_factory.mktemp("tuning"))
    lsp_client.ws = ws
    await start(lsp_client, ws, libtpu=False, executor="inline", tuneMaxEvals=6, maxConcurrentTunings=1)
    yield
    await end_session(lsp_client)


async def lenses(client: LanguageClient, uri: str) -> list[types.CodeLens]:
    return list(
        await client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
    )


def states(client: LanguageClient, uri: str, kernel: str, shape_set: int | None = None) -> list[dict]:
    return [
        p
        for p in rec(client).of("helion/tuningState")
        if attr(p, "uri") == uri and attr(p, "kernel") == kernel and shape_set in (None, attr(p, "shapeSet"))
    ]


async def wait_state(
    client: LanguageClient,
    uri: str,
    kernel: str,
    wanted: tuple[str, ...],
    shape_set=None,
    timeout=300,  # a tuning's gate asks libtpu at the real shapes: over a minute on two busy cores
    since=0,
):
    """The latest state in `wanted` among the notifications after the first `since` ones."""

    def found():
        seen = states(client, uri, kernel, shape_set)[since:]
        return next((p for p in reversed(seen) if attr(p, "state") in wanted), None)

    return await rec(client).wait(found, timeout)


async def execute(client: LanguageClient, command: str, argument: dict):
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=command, arguments=[argument])
    )


async def configure(client: LanguageClient, values: dict) -> None:
    client.set_configuration(values, section="helion", scope_uri=client.ws.as_uri())
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    await asyncio.sleep(0.3)


def config_text(config: dict) -> str:
    def lit(v):
        if isinstance(v, str):
            return f'"{v}"'
        if isinstance(v, list):
            return "[" + ", ".join(lit(x) for x in v) + "]"
        return repr(v)

    return "helion.Config(" + ", ".join(f"{k}={lit(config[k])}" for k in sorted(config)) + ")"


async def test_tune_from_the_lens_with_progress_then_apply(client: LanguageClient):
    path = client.ws / "softmax.py"
    slow = "@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8]))"
    text = path.read_text().replace("@helion.kernel(static_shapes=True)", slow)
    uri = open_doc(client, path, text)
    await stage_diagnostics(client, uri, 1, "front")
    tune = next(lens for lens in await lenses(client, uri) if lens.command.title == "Tune on v7x")
    assert tune.command.command == "helion.tune"
    refreshes = rec(client).refreshes
    result = await execute(client, "helion.tune", tune.command.arguments[0])
    assert [j["state"] for j in result["jobs"]] == ["queued"]
    running = await wait_state(client, uri, "softmax", ("running",), 0)
    assert attr(running, "shapeSet") == 0
    done = await wait_state(client, uri, "softmax", FINAL, 0)
    assert attr(done, "state") == "done", done
    best = attr(attr(done, "best"), "config")
    best = best._asdict() if hasattr(best, "_asdict") else dict(best)
    assert attr(done, "evaluated") >= 1

    # progress: begin (cancellable) ... report ... end
    def reports():
        return [
            r
            for token, rs in client.progress_reports.items()
            if str(token).startswith("helion-tune-")
            for r in rs
        ]

    await rec(client).wait(lambda: reports() and isinstance(reports()[-1], types.WorkDoneProgressEnd), 10)
    reports = reports()
    assert isinstance(reports[0], types.WorkDoneProgressBegin) and reports[0].cancellable
    assert "softmax" in reports[0].title
    assert isinstance(reports[-1], types.WorkDoneProgressEnd)
    # the lens shows the stored best and offers Apply
    await rec(client).wait(lambda: rec(client).refreshes > refreshes, timeout=10)
    # the decorator's config= is shape set 1's too: it keeps it (apply_plan.py), so one config per shape set
    # (the lens says so once the plan's compiles are done; until then it reads "Apply")
    per_set = "Apply (configs=[…] per shape set)"
    for _ in range(100):
        found = await lenses(client, uri)
        titles = [lens.command.title for lens in found]
        if per_set in titles:
            break
        await asyncio.sleep(0.2)
    assert any(t.startswith("Best: ") for t in titles), titles
    apply = next((lens for lens in found if lens.command.title == per_set), None)
    assert apply is not None, titles
    assert any(t.startswith("Best: ") and "× vs current" in t for t in titles), titles
    assert apply.command.arguments[0]["config"] == best
    tuned = await rec(client).wait(
        lambda: next((m.message for m in client.messages if "Tuned softmax (shape set 0) [model estimate for v7x]" in m.message),
                     None), 5
    )
    assert "× vs current). Click *Apply* on its Best lens" in tuned, tuned  # the lens it points at is there
    out = await execute(client, "helion.applyConfig", apply.command.arguments[0])
    assert out["applied"] is True
    kept = config_text({"block_sizes": [8]})
    expected = text.replace(slow, f"@helion.kernel(static_shapes=True, configs=[{config_text(best)}, {kept}])")
    assert rec(client).texts[uri] == expected


async def test_cancel_from_the_progress_and_by_command_and_the_queue(client: LanguageClient):
    await configure(client, {"tuneMaxEvals": None, "tuneBudgetSeconds": 120, "executor": "inline"})
    path = client.ws / "attention.py"
    uri = open_doc(client, path)
    await stage_diagnostics(client, uri, 1, "front")
    known = set(client.progress_reports)
    result = await execute(client, "helion.tune", {"uri": uri, "kernel": "attention", "shapeSet": None})
    assert [j["shapeSet"] for j in result["jobs"]] == [0, 1]
    await wait_state(client, uri, "attention", ("running",), 0)
    titles = [lens.command.title for lens in await lenses(client, uri)]
    assert any(t.startswith("Tuning… ") for t in titles) and "Tuning queued… (cancel)" in titles  # limit 1
    stats = await request(client, "helion/stats", {})
    pid = next(t["pid"] for t in stats["tuners"] if t["kernel"] == "attention")
    token = await rec(client).wait(lambda: next(iter(set(client.progress_reports) - known), None), 30)
    client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    cancelled = await wait_state(client, uri, "attention", FINAL, 0)
    assert attr(cancelled, "state") == "cancelled"
    await rec(client).wait(lambda: not _alive(pid), 15)
    # the queued shape set started; cancel it (and everything else) by command
    await wait_state(client, uri, "attention", ("running",), 1)
    out = await execute(client, "helion.cancelTuning", {"uri": None, "kernel": None})
    assert [j["shapeSet"] for j in out["cancelled"]] == [1]
    assert attr(await wait_state(client, uri, "attention", FINAL, 1), "state") == "cancelled"
    assert (await request(client, "helion/stats", {}))["tuners"] == []


async def test_a_killed_tuner_fails_cleanly_and_an_edit_makes_a_run_stale(client: LanguageClient):
    path = client.ws / "bmm.py"
    text = path.read_text()
    uri = open_doc(client, path, text)
    await stage_diagnostics(client, uri, 1, "front")
    await execute(client, "helion.tune", {"uri": uri, "kernel": "bmm", "shapeSet": 0})
    await wait_state(client, uri, "bmm", ("running",))
    pid = next(
        t["pid"] for t in (await request(client, "helion/stats", {}))["tuners"] if t["kernel"] == "bmm"
    )
    os.kill(pid, signal.SIGKILL)
    failed = await wait_state(client, uri, "bmm", FINAL)
    assert attr(failed, "state") == "failed" and "killed by signal 9" in attr(failed, "message")
    await rec(client).wait(
        lambda: any("Tuning bmm (shape set 0) failed" in m.message for m in client.messages), 5
    )
    # the server still serves, and the lens offers a retry
    assert "Tuning failed: retry on v7x" in [lens.command.title for lens in await lenses(client, uri)]

    since = len(states(client, uri, "bmm"))
    await execute(client, "helion.tune", {"uri": uri, "kernel": "bmm", "shapeSet": 0})
    await wait_state(client, uri, "bmm", ("running",), since=since)
    pid = next(
        t["pid"] for t in (await request(client, "helion/stats", {}))["tuners"] if t["kernel"] == "bmm"
    )
    change_doc(client, uri, text.replace("acc.to(out.dtype)", "(acc * 2).to(out.dtype)"))
    stale = await wait_state(client, uri, "bmm", ("stale", "done", "failed"), timeout=30, since=since)
    assert attr(stale, "state") == "stale"
    await rec(client).wait(lambda: not _alive(pid), 15)
    # a comment-only edit does not make a run stale
    count = len(states(client, uri, "bmm"))
    await execute(client, "helion.tune", {"uri": uri, "kernel": "bmm", "shapeSet": 0})
    await wait_state(client, uri, "bmm", ("running",), since=count)
    change_doc(
        client, uri, text.replace("acc.to(out.dtype)", "(acc * 2).to(out.dtype)") + "\n# just a comment\n"
    )
    await asyncio.sleep(1.5)  # longer than the debounce
    assert all(attr(p, "state") in ("queued", "running") for p in states(client, uri, "bmm")[count:])
    await execute(client, "helion.cancelTuning", {"uri": uri, "kernel": "bmm"})


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


async def test_tune_file_queues_every_shape_set_of_every_kernel(client: LanguageClient):
    path = client.ws / "add.py"
    uri = open_doc(client, path)
    await stage_diagnostics(client, uri, 1, "front")
    result = await execute(client, "helion.tuneFile", {"uri": uri})
    assert [(j["kernel"], j["shapeSet"]) for j in result["jobs"]] == [("add", 0), ("add", 1)]
    out = await execute(client, "helion.cancelTuning", {"uri": uri, "kernel": None})
    assert sorted(j["shapeSet"] for j in out["cancelled"]) == [0, 1]
    for index in (0, 1):
        assert attr(await wait_state(client, uri, "add", FINAL, index), "state") == "cancelled"
    with pytest.raises(Exception, match="is not open"):
        await execute(client, "helion.tuneFile", {"uri": uri + ".nope"})
