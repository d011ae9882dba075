"""The message after a tuning says what the lenses show: a best within the worth-applying margin, or the
current config itself, is said to be so and no Apply is pointed at; an offered Apply is pointed at. The lens
and the message read one decision (helion_ls/features/offer.py)."""

from __future__ import annotations

import asyncio

import pytest
import pytest_lsp
from conftest import MORE_KERNELS
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_ls_support import (
    attr,
    end_session,
    make_workspace,
    open_doc,
    rec,
    server_config,
    stage_diagnostics,
    start,
)

import compiler
from compiler.tune.keys import TrialKey, shape_key
from compiler.tune.store import Trial, TuningStore
from helion_ls.features.offer import apply_offer, tuned_message
from helion_ls.session.store import Summary

pytestmark = pytest.mark.asyncio(loop_scope="module")
RMS = (MORE_KERNELS / "rms_norm_sets.py").read_text()
FITS = {"vmem_verdict": "fits"}


def trial(config: dict, seconds: float) -> Trial:
    return Trial(config, seconds, "ok", FITS, "model", 0.0)


@pytest.mark.parametrize(("best", "now", "expected"), [
    (1.00e-4, 1.01e-4, ", 1.0 % faster than the current config, under the 2% worth applying: no Apply lens"),
    (1.00e-4, 1.50e-4, " (1.50× vs current). Click *Apply* on its Best lens to put it in the decorator."),
])
async def test_the_message_and_the_lens_read_one_decision(best: float, now: float, expected: str):
    summary = Summary(trial({"block_sizes": [128]}, best), trial({"block_sizes": [256]}, now), 2)
    offer = apply_offer(summary, compiler.Config(block_sizes=[256]))
    text = tuned_message("Tuned k (shape set 0) on v7x [model]", "bs=[128] — 100.0 µs", offer)
    assert text.startswith(f"Tuned k (shape set 0) on v7x [model]: best bs=[128] — 100.0 µs{expected}"), text
    assert offer.apply == ("Apply" in expected and "no Apply" not in expected)
    current = apply_offer(summary, compiler.Config(block_sizes=[128]))
    assert current.is_current and not current.apply and current.note() == " (current)"
    assert "the config it compiles with now: nothing to apply" in tuned_message("T", "b", current)


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    ws = make_workspace(tmp_path_factory.mktemp("tune_message"))
    lsp_client.ws = ws
    lsp_client.store = ws.parent / "store" / "tuning.sqlite"
    await start(lsp_client, ws, libtpu=False, executor="inline", tuneMaxEvals=4, compilerCheck="off")
    yield
    await end_session(lsp_client)


def record(client: LanguageClient, text: str, name: str, config: dict, seconds: float) -> None:
    kernel = compiler.load(text).kernels[name]
    key = TrialKey(kernel.source_hash, shape_key(kernel.shape_sets[0]), "v7x", "model")
    with TuningStore(client.store) as store:
        store.record_trial(key, config, seconds, "ok", FITS)


async def lens_titles(client: LanguageClient, uri: str, line: int) -> list[str]:
    found = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    return [lens.command.title for lens in found or [] if lens.range.start.line == line]


async def tune_and_message(client: LanguageClient, uri: str, name: str) -> str:
    before, since = len(client.messages), len(rec(client).of("helion/tuningState"))
    await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="helion.tune", arguments=[{"uri": uri, "kernel": name, "shapeSet": 0}]))

    def done():
        return next((p for p in rec(client).of("helion/tuningState")[since:]
                     if attr(p, "kernel") == name and attr(p, "state") in ("done", "failed")), None)

    state = await rec(client).wait(done, 300)
    assert attr(state, "state") == "done", state
    found = await rec(client).wait(
        lambda: next((m.message for m in client.messages[before:] if m.message.startswith(f"Tuned {name} ")), None), 30)
    return found


async def test_a_best_within_the_margin_is_said_so_and_no_apply_is_pointed_at(client: LanguageClient):
    name = "rms_margin"
    text = RMS.replace("def rms_norm_rows(", f"def {name}(")
    path = client.ws / f"{name}.py"
    path.write_text(text)
    uri = open_doc(client, path, text)
    await stage_diagnostics(client, uri, 1, "front", timeout=120)
    kernel = compiler.load(text).kernels[name]
    current = dict(kernel.compile(shape_set=0, chip="v7x").config)
    other = {**current, "block_sizes": [8 if current["block_sizes"][0] != 8 else 16]}
    # faster than anything the model will estimate: the stored best stays `other`, 1 % ahead of the current
    record(client, text, name, current, 1.01e-7)
    record(client, text, name, other, 1.00e-7)
    message = await tune_and_message(client, uri, name)
    assert "1.0 % faster than the current config, under the 2% worth applying: no Apply lens" in message, message
    assert "Click *Apply*" not in message and "Use the Apply lens" not in message, message
    line = text.splitlines().index(next(x for x in text.splitlines() if x.startswith("# helion: args(")))
    titles = []
    for _ in range(50):  # the lens shows the same decision
        titles = await lens_titles(client, uri, line)
        if any(t.startswith("Best: ") for t in titles):
            break
        await asyncio.sleep(0.2)
    assert any("(+1.0 %: too little to apply)" in t for t in titles), titles
    assert not any(t.startswith("Apply") for t in titles), titles

    # the current config itself is the best: said so, nothing to apply
    record(client, text, name, current, 0.5e-7)
    message = await tune_and_message(client, uri, name)
    assert "the config it compiles with now: nothing to apply." in message, message
