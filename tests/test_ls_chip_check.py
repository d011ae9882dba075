"""*Check on TPU* end to end (features/chip_check.py): the command runs `helion-pallas check --json` for one
kernel as a job of the server's Tuner and puts its verdict on the kernel's decorator line, beside the analysis's
diagnostics, until the kernel is edited. Here (CI: no TPU) the check runs in interpret mode and says so; on a
TPU VM of the chip the same command runs on the chip."""

from __future__ import annotations

import shutil

import pytest
import pytest_lsp
from conftest import EXAMPLES
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_ls_support import (
    change_doc,
    end_session,
    final_diagnostics,
    make_workspace,
    open_doc,
    rec,
    save_doc,
    server_config,
    start,
)

from helion_ls.features.chip_verdicts import verdict_diagnostics


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    ws = make_workspace(tmp_path_factory.mktemp("chipcheck"))
    shutil.copy(EXAMPLES / "add.py", ws / "add.py")
    lsp_client.ws = ws
    await start(lsp_client, ws, libtpu=False)
    yield
    await end_session(lsp_client)


def checked(client: LanguageClient, uri: str) -> list:
    published = [p for p in rec(client).of("diagnostics") if p.uri == uri]
    return [d for d in published[-1].diagnostics if d.source == "helion check"] if published else []


@pytest.mark.asyncio(loop_scope="module")
async def test_check_puts_its_verdict_on_the_kernel_line_until_the_kernel_changes(client: LanguageClient):
    uri = open_doc(client, client.ws / "add.py")
    await final_diagnostics(client, uri, 1)
    answer = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="helion.checkOnChip", arguments=[{"uri": uri, "kernel": "add"}]))  # fmt: skip
    assert answer["state"] in ("queued", "running"), answer
    await rec(client).wait(lambda: checked(client, uri), 900)
    (verdict,) = checked(client, uri)
    text = (client.ws / "add.py").read_text()
    decorator = text.splitlines().index("@helion.kernel(static_shapes=True)")
    assert verdict.range.start.line == decorator and verdict.severity == types.DiagnosticSeverity.Information
    assert verdict.message.startswith("Check passed (-): ran "), verdict.message
    assert "interpret mode on this CPU for v7x" in verdict.message or "on the chip" in verdict.message
    await rec(client).wait(lambda: any("Check of add: ok" in m.message for m in client.messages), 60)
    # an edit of the kernel: its verdict belongs to code that is gone
    version = change_doc(client, uri, text.replace("x[block] + y[block]", "y[block] + x[block]"))
    save_doc(client, uri)  # kernels are compiled on open and save
    await final_diagnostics(client, uri, version)
    assert not checked(client, uri)


def test_failing_strategies_are_errors_naming_where_they_ran():
    rng = {"start": {"line": 3, "character": 0}, "end": {"line": 3, "character": 10}}
    result = {"verdict": "failed", "where": "on the chip: TPU v5 lite (v5e)", "notes": [], "rows": [
        {"loop_type": "unroll", "config": "bs=[8]", "eager": "ok", "mine": "ok", "verdict": "ok"},
        {"loop_type": "fori_loop", "config": "bs=[8]", "eager": "MISMATCH 0.5", "mine": "-", "verdict": "mismatch"},
    ]}
    (error,) = verdict_diagnostics(result, None, rng)
    assert error["severity"] == 1 and error["range"] == rng
    assert error["message"].startswith("fori_loop (bs=[8]): mismatch — vs eager MISMATCH 0.5")
    assert error["message"].endswith("(ran on the chip: TPU v5 lite (v5e))")
    (unfinished,) = verdict_diagnostics(None, "the tuner was killed by signal 9", rng)
    assert unfinished["severity"] == 2 and "killed" in unfinished["message"]


def test_a_note_does_not_hide_that_every_strategy_passed():
    rng = {"start": {"line": 3, "character": 0}, "end": {"line": 3, "character": 10}}
    result = {"verdict": "ok", "where": "on the chip: TPU v5 lite (v5e)", "notes": ["softmax: run at x=bf16[512, 128]"],
              "rows": [{"loop_type": "unroll", "config": "bs=[8]", "eager": "ok", "mine": "ok", "verdict": "ok"}]}
    passed, note = verdict_diagnostics(result, None, rng)
    assert passed["severity"] == 3 and passed["message"] == "Check passed (unroll): ran on the chip: TPU v5 lite (v5e)"
    assert note["severity"] == 2 and note["message"].startswith("softmax: run at")
