"""End to end: *Apply* on a kernel laid out as vLLM keeps its Helion ops (`helion/ops/<op>.py`, tuned configs in
`helion/configs/<kernel>/<platform>.json`) writes the TPU platform's entry where vLLM reads it, not the
decorator, and the kernel hover says which entry vLLM runs it with.

The test reads the entry back with vLLM's own rules (the case key's entry, else the default) and checks the
GPU platform file and the TPU file's other entries are kept byte for byte."""

from __future__ import annotations

import asyncio
import json

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_ls_support import (
    attr,
    end_session,
    final_diagnostics,
    line_of,
    make_workspace,
    open_doc,
    rec,
    server_config,
    start,
)

import compiler
from compiler.ir import vllm_configs
from compiler.ir.config import Config
from compiler.tune.keys import TrialKey, shape_key
from compiler.tune.store import TuningStore

pytestmark = pytest.mark.asyncio(loop_scope="module")
CHIP = "v5e"
KERNEL = "rms_norm_tpu"

# our own kernel, in the style of vLLM's Helion ops
OP = '''"""RMS norm of each row, scaled by a weight."""

import helion
import helion.language as hl
import torch


# helion: args(x=bf16[128, 4096], weight=bf16[4096], epsilon=1e-6)
@helion.kernel()
def rms_norm_tpu(x: torch.Tensor, weight: torch.Tensor, epsilon: float) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        row = x[tile_m, :].to(torch.float32)
        var = torch.mean(row * row, dim=-1, keepdim=True)
        normed = row * torch.rsqrt(var + epsilon)
        out[tile_m, :] = (normed * weight[None, :].to(torch.float32)).to(out.dtype)
    return out
'''
H100 = [  # a GPU platform's file as vLLM writes it
    {"key": {}, "config": {"block_sizes": [4], "num_warps": 8, "num_stages": 1, "pid_type": "flat"}},
    {"key": {"hidden_size": 4096, "num_tokens": 128}, "config": {"block_sizes": [1], "num_warps": 4}},
]
TUNED = {"block_sizes": [32], "pallas_loop_type": "unroll"}
TUNED_AGAIN = {"block_sizes": [64], "pallas_loop_type": "emit_pipeline"}


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    ws = make_workspace(tmp_path_factory.mktemp("vllm"))
    helion_dir = ws / "vllm_like" / "helion"
    (helion_dir / "ops").mkdir(parents=True)
    (helion_dir / "ops" / "rms_norm.py").write_text(OP)
    configs = helion_dir / "configs" / KERNEL
    configs.mkdir(parents=True)
    (configs / "nvidia_h100.json").write_text(json.dumps(H100, indent=2) + "\n")
    lsp_client.ws, lsp_client.configs = ws, configs
    lsp_client.store = ws.parent / "store" / "tuning.sqlite"
    # the model, not `auto`: on a v5e TPU VM auto would measure on the chip, and the stored model trial this
    # test makes the best (store_best) would not be the one shown
    await start(lsp_client, ws, libtpu=False, chip=CHIP, evaluator="model", executor="inline", tuneMaxEvals=4,
                compilerCheck="off")
    yield
    await end_session(lsp_client)


def store_best(client: LanguageClient, config: dict, seconds: float) -> None:
    kernel = compiler.load(OP).kernels[KERNEL]
    key = TrialKey(kernel.source_hash, shape_key(kernel.shape_sets[0]), CHIP, "model")
    with TuningStore(client.store) as store:
        store.record_trial(key, config, seconds, "ok", {"tflops": 1.0})


async def apply_lens(client: LanguageClient, uri: str, config: dict) -> types.CodeLens:
    """The Apply lens offering `config`, once the server has seen the store change."""
    for _ in range(150):
        found = await client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
        for lens in found or []:
            if lens.command.command == "helion.applyConfig" and lens.command.arguments[0]["config"] == config:
                return lens
        await asyncio.sleep(0.2)
    raise AssertionError(f"no Apply lens for {config}")


async def kernel_hover(client: LanguageClient, uri: str) -> str:
    line = line_of(OP, "def rms_norm_tpu")
    for _ in range(150):  # the hover answers from compiled results only
        result = await client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line, 6)))
        if result is not None and "vLLM config" in result.contents.value:
            return result.contents.value
        await asyncio.sleep(0.2)
    raise AssertionError("no kernel hover with a vLLM config line")


async def test_apply_writes_the_tpu_platform_entry_vllm_reads(client: LanguageClient):
    path = client.configs.parent.parent / "ops" / "rms_norm.py"
    uri = open_doc(client, path)
    await final_diagnostics(client, uri, 1)
    tpu_file = client.configs / "tpu_v5e.json"
    assert "no TPU config file `configs/rms_norm_tpu/tpu_v5e.json`: vLLM disables the kernel" in \
        await kernel_hover(client, uri)

    store_best(client, TUNED, 1.0e-6)
    lens = await apply_lens(client, uri, TUNED)
    edits = len(rec(client).edits)
    answer = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=lens.command.command, arguments=lens.command.arguments))
    assert answer["applied"] is True
    assert len(rec(client).edits) == edits  # the decorator is left as it is: no edit of the kernel's file

    # vLLM's rule reads it back: no case key on a shape line, so the default entry, for any case
    for case in ({}, {"hidden_size": 4096, "num_tokens": 128}):
        entry = vllm_configs.lookup(tpu_file, case)
        assert entry is not None and entry.is_default and Config(entry.config) == Config(TUNED)
    assert json.loads((client.configs / "nvidia_h100.json").read_text()) == H100
    assert tpu_file.read_text() == json.dumps([{"key": {}, "config": TUNED}], indent=2) + "\n"
    assert any("tpu_v5e.json" in m.message and "default entry" in m.message for m in client.messages)
    hover = await kernel_hover(client, uri)
    assert "the default entry of `configs/rms_norm_tpu/tpu_v5e.json`" in hover, hover

    # the kernel now compiles with the entry vLLM runs it with: its hover says so, the Best lens is current
    async def current() -> list[str]:
        found = await client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
        return [lens.command.title for lens in found or []]

    for _ in range(150):
        titles = await current()
        if any(t.startswith("Best:") and "(current)" in t for t in titles):
            break
        await asyncio.sleep(0.2)
    assert any(t.startswith("Best:") and "(current)" in t for t in titles), titles
    assert not any(t.startswith("Apply") for t in titles), titles
    hover = await kernel_hover(client, uri)
    assert "Config (configs/rms_norm_tpu/tpu_v5e.json, default entry): `helion.Config(block_sizes=[32]" in hover, hover


async def test_apply_again_updates_the_entry_and_keeps_the_others(client: LanguageClient):
    tpu_file = client.configs / "tpu_v5e.json"
    other = {"key": {"hidden_size": 5120, "num_tokens": 8}, "config": {"block_sizes": [8]}}
    before = [{"key": {}, "config": TUNED}, other]
    kept = json.dumps(before, indent=4)  # a hand-made file: four spaces, no newline at the end
    tpu_file.write_text(kept)
    uri = (client.configs.parent.parent / "ops" / "rms_norm.py").as_uri()

    store_best(client, TUNED_AGAIN, 0.5e-6)
    lens = await apply_lens(client, uri, TUNED_AGAIN)
    answer = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=lens.command.command, arguments=lens.command.arguments))
    assert answer["applied"] is True
    text = tpu_file.read_text()
    assert json.loads(text) == [{"key": {}, "config": TUNED_AGAIN}, other]
    assert text == json.dumps(json.loads(text), indent=4)  # the file's own format, the other entry's text kept
    assert text.endswith(kept[kept.index('    {\n        "key": {\n            "hidden_size"'):])
    entry = vllm_configs.lookup(tpu_file, {"hidden_size": 5120, "num_tokens": 8})
    assert entry is not None and entry.config == other["config"]  # its own entry, by vLLM's rule


async def test_the_message_after_tuning_says_where_apply_writes(client: LanguageClient):
    uri = (client.configs.parent.parent / "ops" / "rms_norm.py").as_uri()
    store_best(client, {"block_sizes": [16], "pallas_loop_type": "unroll"}, 1.0e-8)  # beats the current entry
    before, since = len(client.messages), len(rec(client).of("helion/tuningState"))
    await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="helion.tune", arguments=[{"uri": uri, "kernel": KERNEL, "shapeSet": 0}]))

    def done():
        return next((p for p in rec(client).of("helion/tuningState")[since:]
                     if attr(p, "kernel") == KERNEL and attr(p, "state") in ("done", "failed")), None)

    assert attr(await rec(client).wait(done, 300), "state") == "done"
    message = await rec(client).wait(lambda: next(
        (m.message for m in client.messages[before:] if m.message.startswith(f"Tuned {KERNEL} ")), None), 30)
    assert message.endswith("Click *Apply* on its Best lens to write it to the default entry of "
                            "configs/rms_norm_tpu/tpu_v5e.json."), message


async def test_a_platform_file_not_in_vllms_format_is_never_overwritten(client: LanguageClient):
    uri = (client.configs.parent.parent / "ops" / "rms_norm.py").as_uri()
    tpu_file = client.configs / "tpu_v5e.json"
    broken = '[{"key": {}, "config": {"block_sizes": [64]}},'  # a hand edit half done
    tpu_file.write_text(broken)
    assert "`configs/rms_norm_tpu/tpu_v5e.json` cannot be read (not valid JSON" in await kernel_hover(client, uri)
    lens = await apply_lens(client, uri, {"block_sizes": [16], "pallas_loop_type": "unroll"})
    before = len(client.messages)
    answer = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=lens.command.command, arguments=lens.command.arguments))
    assert answer["applied"] is False and tpu_file.read_text() == broken
    assert any("Cannot write the tuned config of rms_norm_tpu: not valid JSON" in m.message
               for m in client.messages[before:]), [m.message for m in client.messages[before:]]
