"""What keeps a cold start fast: a compile worker's warm-up and first compiles import neither torch._dynamo
nor jax (together ~1.5 s of a cold start's 2.5 s budget), skipping dynamo changes no generated code, and
the second compile worker does not start importing before the first has answered, and what the parse
found is published before any compile.

Each check runs in a fresh interpreter, since one import anywhere in the test process would hide it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest
import pytest_lsp
from conftest import EXAMPLES, MORE_KERNELS, REPO
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_ls_support import (
    TWICE,
    end_session,
    final_diagnostics,
    make_workspace,
    open_doc,
    rec,
    request,
    server_config,
    shut_down_pool,
    start,
    until,
)

from helion_ls.workers import compile_pool

# Warm up as the compile worker does, then compile every kernel of the given files through its handler.
WORKER_COMPILES = """
import gc, json, sys
from pathlib import Path
import compiler
from helion_ls.workers import compile_worker

torch_at_import = "torch" in sys.modules
if sys.argv[1] == "worker":  # as compile_worker.main does
    gc.disable()
    compile_worker.warm_up()
compiled = {}
handler = compile_worker.Compiler()
for path in sys.argv[2:]:
    source = Path(path).read_text()
    for name in compiler.load(source, Path(path).name).kernels:
        answer = handler.handle({"source": source, "kernel": name, "args": None, "config": None,
                                 "chip": "v7x", "file": Path(path).name})
        got = answer["compiled"]
        compiled[f"{Path(path).name}:{name}"] = [None if got is None else got.source,
                                                 [d.message for d in answer["diagnostics"]]]
print(json.dumps({"modules": sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "jax")),
                  "compiled": compiled, "torch_at_import": torch_at_import, "gc_enabled": gc.isenabled()}))
"""


def _compile_in_fresh_process(mode: str, files: list[str]) -> dict:
    done = subprocess.run(  # one hash seed for both: nothing but the dynamo skip may differ
        [sys.executable, "-c", WORKER_COMPILES, mode, *files],
        capture_output=True, text=True, timeout=300, cwd=REPO, env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


FILES = [str(p) for p in sorted(EXAMPLES.glob("*.py")) + sorted(MORE_KERNELS.glob("*.py"))]


def test_worker_warm_up_and_compiles_import_neither_dynamo_nor_jax():
    got = _compile_in_fresh_process("worker", FILES)
    assert not got["torch_at_import"]  # torch comes with warm_up, while main keeps the collector off
    assert got["gc_enabled"]  # and warm_up turns it back on
    assert "torch" in got["modules"]  # the front end types operations with torch's meta tensors
    assert "torch._dynamo" not in got["modules"]
    assert not [m for m in got["modules"] if m.split(".")[0] == "jax"]
    assert sum(code is not None for code, _ in got["compiled"].values()) >= 20


def test_skipping_dynamo_changes_no_generated_code():
    files = FILES[:: max(1, len(FILES) // 8)]  # a spread of kernels: two fresh interpreters each
    skipped = _compile_in_fresh_process("worker", files)
    plain = _compile_in_fresh_process("plain", files)
    assert "torch._dynamo" in plain["modules"]  # without the skip torch does import it (else this proves nothing)
    assert skipped["compiled"] == plain["compiled"]
    assert sum(code is not None for code, _ in plain["compiled"].values()) >= 5




async def test_the_second_compile_worker_waits_for_the_first_answer(monkeypatch):
    """Its imports would compete with the server's and the first compile on two cores."""
    monkeypatch.setattr(compile_pool, "OTHERS_AFTER", 600.0)
    pool = compile_pool.CompilePool(workers=2)
    try:
        pool.start()
        await until(lambda: len(pool.pids) == 1)
        await pool.workers[0].wait_started()
        await asyncio.sleep(1.0)
        assert len(pool.pids) == 1
        request = {"source": TWICE, "kernel": "twice", "args": None, "config": None, "chip": "v7x", "file": "t.py"}
        answer = await pool.run("twice", request, on_failure=lambda why: pytest.fail(why))
        assert answer["compiled"] is not None and "pallas_call" in answer["compiled"].source
        await until(lambda: len(pool.pids) == 2)
    finally:
        await shut_down_pool(pool)


async def test_the_second_compile_worker_starts_anyway_when_nothing_is_asked(monkeypatch):
    monkeypatch.setattr(compile_pool, "OTHERS_AFTER", 0.2)
    pool = compile_pool.CompilePool(workers=2)
    try:
        pool.start()
        await until(lambda: len(pool.pids) == 2)
        assert pool.submitted == 0
    finally:
        await shut_down_pool(pool)


BAD_SHAPE_LINE_AND_BAD_OP = """import helion
import helion.language as hl
import torch


# helion: args(x=f99[64, 128])
@helion.kernel
def bad_args(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] * 2.0
    return out


# helion: args(x=f32[64, 128])
@helion.kernel
def bad_op(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = torch.no_such_op(x[tile])
    return out
"""


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    ws = make_workspace(tmp_path_factory.mktemp("cold"))
    lsp_client.ws = ws
    await start(lsp_client, ws, libtpu=False)
    yield
    await end_session(lsp_client)


@pytest.mark.asyncio(loop_scope="module")
async def test_what_the_parse_found_is_published_before_any_compile(client: LanguageClient):
    """A bad shape line shows at once, not after a (cold) compile worker got through the other kernels."""
    path = client.ws / "parse_first.py"
    uri = open_doc(client, path, BAD_SHAPE_LINE_AND_BAD_OP)
    final = await final_diagnostics(client, uri, 1)
    assert {"HPL104", "HPL102"} <= {d.code for d in final}
    published = [p.diagnostics for p in rec(client).of("diagnostics") if p.uri == uri and p.version == 1]
    assert [d.code for d in published[0]] == ["HPL104"]  # the parse's finding alone: before any compile


@pytest.mark.asyncio(loop_scope="module")
async def test_the_server_itself_never_imports_torch(client: LanguageClient):
    """Parsing, keys, remembered results and the workers' answers (plans, VMEM reports) need no torch:
    the server's start is its imports without torch's second of CPU, beside the first worker's."""
    path = client.ws / "attention.py"
    uri = open_doc(client, path)
    await final_diagnostics(client, uri, 1)
    line = path.read_text().splitlines().index(next(t for t in path.read_text().splitlines() if t.startswith("def ")))
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=5)))
    assert hover is not None and "VMEM" in hover.contents.value
    stats = await request(client, "helion/stats", {})
    assert stats["counts"]["compiles"] >= 2 and stats["torchImported"] is False
