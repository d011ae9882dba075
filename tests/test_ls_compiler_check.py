"""End to end: the TPU compiler's check of the model's picks in the editor — the Best lens says whether the
compiler agrees, the tuning plot carries the comparison, the kernel hover shows the compiler's figure beside
the model's; and a real tuning on v6e is followed by the real check (libtpu) in the background."""

from __future__ import annotations

import asyncio

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_ls_support import (
    end_session,
    make_workspace,
    open_doc,
    rec,
    request,
    server_config,
    stage_diagnostics,
    start,
)

import compiler
from compiler.tpu.libtpu_compile import libtpu_available
from compiler.tune.crosscheck import compare, latest_by_config
from compiler.tune.keys import TrialKey, shape_key
from compiler.tune.store import TuningStore

pytestmark = pytest.mark.asyncio(loop_scope="module")
LAUNCH = 100e-6  # the model's dispatch overhead in the trials written here: left out of the comparison


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    ws = make_workspace(tmp_path_factory.mktemp("check"))
    lsp_client.ws = ws
    lsp_client.store = ws.parent / "store" / "tuning.sqlite"
    # the model, not `auto`: on a v6e TPU VM auto would measure on the chip, and a chip measurement gets no check
    await start(lsp_client, ws, libtpu=False, chip="v6e", evaluator="model", executor="inline", tuneMaxEvals=4)
    yield
    await end_session(lsp_client)


async def lenses(client: LanguageClient, uri: str) -> list[types.CodeLens]:
    return list(
        await client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
    )


def key(text: str, kernel: str, index: int) -> TrialKey:
    k = compiler.load(text).kernels[kernel]
    return TrialKey(k.source_hash, shape_key(k.shape_sets[index]), "v6e")


def write(client: LanguageClient, key: TrialKey, evaluator: str, trials: list[tuple[dict, float]]) -> None:
    with TuningStore(client.store) as store:
        for config, seconds in trials:
            metrics = {"breakdown": {"launch": LAUNCH}} if evaluator == "model" else {"method": "simulated"}
            store.record_trial(key.with_evaluator(evaluator), config, seconds, "ok", metrics)


def best_lens(found: list[types.CodeLens], line: int) -> types.CodeLens:
    return next(lens for lens in found if lens.range.start.line == line and lens.command.title.startswith("Best:"))


async def test_the_lens_plot_and_hover_say_when_the_compiler_disagrees(client: LanguageClient):
    path = client.ws / "add.py"
    text = path.read_text()
    uri = open_doc(client, path, text)
    await stage_diagnostics(client, uri, 1, "front")
    line0 = text[: text.index("# helion: args(")].count("\n")
    kernel = compiler.load(text).kernels["add"]
    current = dict(kernel.compile(args=kernel.shape_sets[0], chip="v6e").config)
    picks = [({"block_sizes": [64, 1024]}, LAUNCH + 10e-6), ({"block_sizes": [128, 512]}, LAUNCH + 11e-6), (current, LAUNCH + 30e-6)]
    k0 = key(text, "add", 0)
    refreshes = rec(client).refreshes
    write(client, k0, "model", picks)
    # the compiler finds the model's second pick 1.5x faster than its first: an order disagreement
    write(client, k0, "schedule", [(picks[0][0], 12e-6), (picks[1][0], 8e-6), (current, 25e-6)])
    await rec(client).wait(lambda: rec(client).refreshes > refreshes, timeout=20)
    lens = best_lens(await lenses(client, uri), line0)
    assert lens.command.title.endswith(" · ⚠ TPU compiler disagrees"), lens.command.title
    assert "TPU compiler disagrees: it ranks bs=[128,512] first (1.50× faster" in lens.command.tooltip

    results = await request(client, "helion/tuningResults", {"uri": uri, "kernel": "add", "shapeSet": 0})
    check = results["compilerCheck"]
    assert check["verdict"] == "disagrees" and check["order_disagrees"] and not check["size_disagrees"]
    assert check["compiler_pick"] == picks[1][0]
    assert sorted(t["evaluator"] for t in results["trials"]) == ["model"] * 3 + ["schedule"] * 3

    at = text.index("def add") + 5
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=text[:at].count("\n"), character=at - text.rfind("\n", 0, at) - 1),
        )
    )
    shown = hover.contents.value
    assert "Time on v6e: model estimate for v6e **" in shown
    assert "TPU compiler estimate **25.0 µs** (libtpu's simulated cycles)" in shown

    # the compiler backs the pick (order and size within the margins): the lens says it agrees
    refreshes = rec(client).refreshes
    write(client, k0, "schedule", [(picks[0][0], 9e-6), (picks[1][0], 9.5e-6)])
    await rec(client).wait(lambda: rec(client).refreshes > refreshes, timeout=20)
    lens = best_lens(await lenses(client, uri), line0)
    assert lens.command.title.endswith(" · TPU compiler agrees"), lens.command.title


@pytest.mark.skipif(not libtpu_available(), reason="the TPU compiler check needs libtpu")
async def test_tuning_on_v6e_is_checked_by_the_compiler_in_the_background(client: LanguageClient):
    path = client.ws / "softmax.py"
    text = path.read_text().replace("# helion: args(x=bf16[65536, 2560])", "# helion: args(x=f32[256, 384])")
    uri = open_doc(client, path, text)
    await stage_diagnostics(client, uri, 1, "front")
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="helion.tune", arguments=[{"uri": uri, "kernel": "softmax", "shapeSet": 0}])
    )
    assert [j["state"] for j in result["jobs"]] == ["queued"]
    line0 = text[: text.index("# helion: args(")].count("\n")

    async def best_title() -> str:
        found = [lens for lens in await lenses(client, uri) if lens.range.start.line == line0]
        return next((lens.command.title for lens in found if lens.command.title.startswith("Best:")), "")

    seen: list[str] = []
    deadline = asyncio.get_running_loop().time() + 300
    while asyncio.get_running_loop().time() < deadline:  # the tuning, then the compiler's check (libtpu)
        seen.append(await best_title())
        if "TPU compiler agrees" in seen[-1] or "TPU compiler disagrees" in seen[-1]:
            break
        await asyncio.sleep(0.5)
    title = seen[-1]
    with TuningStore(client.store) as store:
        k0 = key(text, "softmax", 0)
        check = compare(store.top(k0.with_evaluator("model"), 3), latest_by_config(store.trials(k0.with_evaluator("schedule"))), "v6e")
    assert check is not None and check.pending == 0
    assert all(c.method == "simulated" for c in check.checked)
    expected = " · ⚠ TPU compiler disagrees" if check.disagrees else " · TPU compiler agrees"
    assert title.endswith(expected), (title, check.to_json())
