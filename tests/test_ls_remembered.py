"""End to end: a server remembers what it found, the next server shows it at once and confirms it.

Each test starts real server processes (`python -m helion_ls`) sharing one analysis cache file. Reopening a
file another server analysed publishes the same diagnostics before anything is compiled, never redoes the
lowering (or libtpu) stage of an unchanged kernel, and compiles each kernel again at low priority to
confirm what it showed; a wrong remembered result is replaced. Cache faults (a damaged file, two servers
writing at once, a read-only directory) cost nothing but a warning in the log."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import child_pythonpath
from ls_wire import RawServer
from read_only import make_read_only, make_writable
from test_ls_support import REPO, SEEDS

from compiler.results import AnalysisCache
from compiler.support.diagnostics import Position, Range, error
from helion_ls.session.documents import load_document

UNROLL = 'config=helion.Config(block_sizes=[1, 512, 512], pallas_loop_type="unroll")'
ADD = (SEEDS / "add.py.txt").read_text().split('\n\ndef reference')[0]
ATTENTION = (SEEDS / "attention.py.txt").read_text().replace(
    "@helion.kernel(static_shapes=True)", f"@helion.kernel(static_shapes=True, {UNROLL})"
)
TWO_KERNELS = ATTENTION + "\n\n" + ADD.split("import helion.language as hl\n", 1)[1]  # 4 units


async def start(cache: Path, ws: Path, env: dict[str, str] | None = None, **options: Any) -> RawServer:
    srv = await RawServer.start(env={"HELION_LS_ANALYSIS_CACHE": str(cache), **(env or {})})
    params = {"processId": os.getpid(), "rootUri": ws.as_uri(), "capabilities": {},
              "initializationOptions": {"storePath": str(ws / "store.sqlite"), "libtpu": False, "chip": "v7x",
                                        **options}}
    await srv.request("initialize", params, timeout=60)  # no wait for the server's imports: open at once
    srv.notify("initialized", {})
    return srv


async def stop(srv: RawServer) -> None:
    """As an editor ends a session (shutdown, exit): what the server learned is written before it exits."""
    await srv.request("shutdown", None, timeout=60)
    srv.notify("exit")
    await asyncio.wait_for(srv.proc.wait(), 30)
    await srv.stop()


def published(srv: RawServer, uri: str) -> list[list[dict]]:
    return [p["diagnostics"] for p in srv.of("textDocument/publishDiagnostics") if p["uri"] == uri]


def shown(diags: list[dict]) -> list[tuple]:
    return sorted((d["code"], d["message"], d["range"]["start"]["line"], d["severity"]) for d in diags)


async def analyse(cache: Path, path: Path, text: str | None = None, **options: Any) -> tuple[list[dict], dict]:
    """A whole session on one file: its final diagnostics and the server's stats at the end."""
    srv = await start(cache, path.parent, **options)
    try:
        uri = srv.open(path, text)
        diags = await srv.final_diagnostics(uri, timeout=240)
        stats = await analysed(srv, uri)
        await stop(srv)
    finally:
        await srv.stop()
    return diags, stats


async def analysed(srv: RawServer, uri: str) -> dict:
    """Stats once the server itself (not only the publisher of remembered results at start) has published
    every stage of the document."""
    for _ in range(2400):
        stats = await srv.stats()
        if stats.get("finalVersions", {}).get(uri) == 1:
            return stats
        await asyncio.sleep(0.1)
    raise TimeoutError(f"{uri} not analysed")


async def confirmed(srv: RawServer, count: int) -> dict:
    """Stats once `count` recalled front results have been compiled again."""
    for _ in range(1200):
        stats = await srv.stats()
        if stats.get("counts", {}).get("confirmed", 0) + stats.get("counts", {}).get("replaced", 0) >= count:
            return stats
        await asyncio.sleep(0.1)
    raise TimeoutError(f"confirmations not done: {stats.get('counts')}")


@pytest.fixture
def two_kernels(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    path = ws / "two.py"
    path.write_text(TWO_KERNELS)
    return path


@pytest.mark.asyncio
async def test_reopening_shows_the_same_diagnostics_at_once_and_confirms_them(tmp_path, two_kernels):
    cache = tmp_path / "analysis.sqlite"
    first, stats = await analyse(cache, two_kernels)
    assert any(d["code"] == "HPL300" for d in first) and stats["counts"]["checks"] == 4  # every unit is lowered

    srv = await start(cache, two_kernels.parent)
    try:
        uri = srv.open(two_kernels)
        again = await srv.final_diagnostics(uri, timeout=60)
        assert shown(published(srv, uri)[0]) == shown(first)  # the first publish is already the whole answer
        await srv.wait(lambda: any("published its last complete publish" in line for line in srv.stderr))  # no parse
        assert again == published(srv, uri)[0] and shown(again) == shown(first)
        stats = await confirmed(srv, 4)
        assert stats["counts"]["confirmed"] == 4 and stats["counts"]["replaced"] == 0
        assert stats["counts"]["checks"] == 0 and stats["checkWorkerPid"] is None  # lowering never redone
        assert shown(published(srv, uri)[-1]) == shown(first)
        await stop(srv)
    finally:
        await srv.stop()


@pytest.mark.asyncio
async def test_an_edited_file_reuses_the_results_of_its_unchanged_kernels(tmp_path, two_kernels):
    cache = tmp_path / "analysis.sqlite"
    await analyse(cache, two_kernels)
    # the add kernel changes (a new line of code), the attention kernel only moves down two lines
    edited = "# moved\n# down\n" + TWO_KERNELS.replace("out[tile] = x[tile] + y[tile]", "out[tile] = x[tile] - y[tile]")
    diags, stats = await analyse(cache, two_kernels, edited)
    lines = edited.splitlines()
    overflow = next(d for d in diags if d["code"] == "HPL300")
    assert UNROLL in lines[overflow["range"]["start"]["line"]]  # carried to where the config now is
    assert stats["counts"]["recalled"] == 4  # attention: both shape sets, front and lowering
    assert stats["counts"]["checks"] == 2  # only the edited add kernel is lowered again


@pytest.mark.asyncio
async def test_a_wrong_remembered_result_is_replaced_by_the_fresh_compile(tmp_path, two_kernels):
    cache = tmp_path / "analysis.sqlite"
    first, _ = await analyse(cache, two_kernels)
    text = "# another text: its last publish is not kept, each kernel is recalled\n" + TWO_KERNELS
    loaded = load_document(two_kernels.as_uri(), 1, text, "v7x")
    unit = loaded.kernels["add"].units[0]
    store = AnalysisCache(cache)
    (record,) = store.get_many([("front", unit.key)]).values()
    bogus = error("HPL999", "a result no compile gives", Range(Position(record.basis_line + 3, 4), Position(record.basis_line + 3, 9)))
    store.put_many([type(record)(**{**record.__dict__, "diagnostics": (bogus,)})])
    store.close()

    srv = await start(cache, two_kernels.parent)
    try:
        uri = srv.open(two_kernels, text)
        stats = await confirmed(srv, 4)
        assert stats["counts"]["replaced"] == 1 and stats["counts"]["confirmed"] == 3
        await srv.wait(lambda: "HPL999" not in str(published(srv, uri)[-1]))
        assert any(d["code"] == "HPL999" for d in published(srv, uri)[0])  # shown at once, then replaced
        assert shown(published(srv, uri)[-1]) == [(c, m, line + 1, s) for c, m, line, s in shown(first)]
        await stop(srv)
    finally:
        await srv.stop()
    (fixed,) = AnalysisCache(cache).get_many([("front", unit.key)]).values()
    assert all(d.code != "HPL999" for d in fixed.diagnostics)  # and it is not remembered any more


# ---- cache faults: correct diagnostics, a warning, nothing lost, no crash ------------------------------


@pytest.mark.asyncio
async def test_a_damaged_cache_file_is_replaced_with_a_warning(tmp_path, two_kernels):
    reference, _ = await analyse(tmp_path / "reference.sqlite", two_kernels)
    cache = tmp_path / "analysis.sqlite"
    cache.write_bytes(b"SQLite format 3\x00" + os.urandom(20000))  # a header, then garbage
    srv = await start(cache, two_kernels.parent)
    try:
        uri = srv.open(two_kernels)
        assert shown(await srv.final_diagnostics(uri, timeout=240)) == shown(reference)
        await srv.wait(lambda: any("analysis cache" in line and "WARNING" in line for line in srv.stderr))
        await stop(srv)
    finally:
        await srv.stop()
    assert any(".corrupt-" in p.name for p in tmp_path.iterdir())
    _, stats = await analyse(cache, two_kernels)  # the fresh file took what the server found
    assert stats["counts"]["recalled"] == 8 and stats["counts"]["checks"] == 0


@pytest.mark.asyncio
async def test_two_servers_writing_at_once_lose_nothing(tmp_path, two_kernels):
    cache = tmp_path / "analysis.sqlite"
    other = two_kernels.parent / "other.py"
    other.write_text(ADD.replace("def add(", "def add_again(").replace("x[tile] + y[tile]", "x[tile] * y[tile]"))
    servers = [await start(cache, two_kernels.parent) for _ in range(2)]
    try:
        uris = [srv.open(path) for srv, path in zip(servers, [two_kernels, other], strict=True)]
        await asyncio.gather(*(srv.final_diagnostics(uri, timeout=240) for srv, uri in zip(servers, uris, strict=True)))
        await asyncio.gather(*(stop(srv) for srv in servers))
    finally:
        for srv in servers:
            await srv.stop()
    srv = await start(cache, two_kernels.parent)
    try:
        for path in (two_kernels, other):
            await srv.final_diagnostics(srv.open(path), timeout=60)
        stats = await confirmed(srv, 6)
        assert stats["counts"]["recalled"] == 8 + 4 and stats["counts"]["checks"] == 0
        assert stats["counts"]["replaced"] == 0
        await stop(srv)
    finally:
        await srv.stop()


@pytest.mark.asyncio
async def test_a_read_only_cache_directory_is_read_and_said(tmp_path, two_kernels):
    folder = tmp_path / "ro"
    folder.mkdir()
    cache = folder / "analysis.sqlite"
    reference, _ = await analyse(cache, two_kernels)  # remembered while it was writable
    launcher = make_read_only(folder)
    try:
        srv = await RawServer.start(env={"HELION_LS_ANALYSIS_CACHE": str(cache)}, launcher=launcher)
        params = {"processId": os.getpid(), "rootUri": two_kernels.parent.as_uri(), "capabilities": {},
                  "initializationOptions": {"storePath": str(tmp_path / "store.sqlite"), "libtpu": False,
                                            "chip": "v7x"}}
        try:
            await srv.request("initialize", params, timeout=60)
            srv.notify("initialized", {})
            changed = "# changed\n" + TWO_KERNELS.replace("x[tile] + y[tile]", "x[tile] - y[tile]")
            uri = srv.open(two_kernels, changed)
            diags = await srv.final_diagnostics(uri, timeout=240)
            assert shown(diags) == [(c, m, line + 1, s) for c, m, line, s in shown(reference)]
            stats = await srv.stats()
            assert stats["counts"]["recalled"] == 4  # nothing lost: the unchanged kernel's results are read
            assert stats["remembered"]["problem"] and "read-only" in stats["remembered"]["problem"]
            assert any("read-only" in line and "WARNING" in line for line in srv.stderr)
            await stop(srv)
        finally:
            await srv.stop()
    finally:
        make_writable(folder)


EARLY = """
import json, sys, time
from compiler.results import AnalysisCache
from helion_ls.early import EarlyPublisher
from helion_ls.session.remembered import Remembered

sent = []
publisher = EarlyPublisher(Remembered(AnalysisCache(sys.argv[1])), lambda message: sent.append(message) or True)
publisher.configure({"initializationOptions": {"libtpu": False, "chip": "v7x", "workspaceTrusted": True}}, {"capabilities": {}})
docs = json.loads(sys.argv[2])
for doc in docs:
    publisher.message("textDocument/didOpen", {"textDocument": doc})
deadline = time.monotonic() + 60
while len(publisher.published) < len(docs) and time.monotonic() < deadline:
    time.sleep(0.01)
heavy = sorted(m for m in ("torch", "jax", "lsprotocol", "pygls.lsp") if m in sys.modules)
print(json.dumps({"sent": sent, "heavy": heavy}))
"""


@pytest.mark.asyncio
async def test_remembered_results_are_published_without_torch_or_the_server(tmp_path, two_kernels):
    """What the start-up path runs before the server is built: the kept publish of an unchanged text, and
    each kernel's remembered results composed for a changed one; no torch, jax, lsprotocol or pygls server."""
    cache = tmp_path / "analysis.sqlite"
    first, _ = await analyse(cache, two_kernels)
    uri = two_kernels.as_uri()
    changed = "# one line more\n" + TWO_KERNELS
    docs = [{"uri": uri, "version": 3, "text": TWO_KERNELS}, {"uri": uri, "version": 4, "text": changed}]
    out = await asyncio.create_subprocess_exec(
        sys.executable, "-c", EARLY, str(cache), json.dumps(docs), stdout=asyncio.subprocess.PIPE, cwd=REPO,
        env={**os.environ, "PYTHONPATH": child_pythonpath()})
    got = json.loads((await asyncio.wait_for(out.communicate(), 120))[0])
    assert got["heavy"] == []
    notes = [(m["method"], m["params"]) for m in got["sent"]]
    assert [(method, p.get("version")) for method, p in notes] == [
        ("textDocument/publishDiagnostics", 3), ("helion/diagnosticsStage", 3),
        ("textDocument/publishDiagnostics", 4), ("helion/diagnosticsStage", 4)]
    assert shown(notes[0][1]["diagnostics"]) == shown(first) and notes[1][1]["final"] is True
    assert shown(notes[2][1]["diagnostics"]) == [(c, m, line + 1, s) for c, m, line, s in shown(first)]
    assert notes[3][1]["final"] is True


@pytest.mark.asyncio
@pytest.mark.skipif(importlib.util.find_spec("libtpu") is None, reason="libtpu is not installed")
async def test_the_libtpu_stage_is_never_redone_for_an_unchanged_kernel(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    path = ws / "add.py"
    path.write_text(ADD.replace("# helion: args(x=bf16[16384, 16384], y=bf16[16384, 16384])\n", ""))
    cache = tmp_path / "analysis.sqlite"
    first, stats = await analyse(cache, path, libtpu=True)
    assert stats["counts"]["checks"] == 2  # lowering and the libtpu compile
    srv = await start(cache, ws, libtpu=True)
    try:
        uri = srv.open(path)
        again = await srv.final_diagnostics(uri, timeout=60)
        stats = await confirmed(srv, 1)
        assert shown(again) == shown(first) and stats["counts"]["recalled"] == 3
        assert stats["counts"]["checks"] == 0 and stats["checkWorkerPid"] is None
        await stop(srv)
    finally:
        await srv.stop()


CLI_COMPILE = """
import contextlib, io, json, sys
from compiler.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    status = main(["compile", sys.argv[1], "--emit", sys.argv[2], "--shape-set", sys.argv[3], "-k", sys.argv[4]])
print(json.dumps({"status": status, "out": out.getvalue(), "torch": "torch" in sys.modules}))
"""


def cli_compile(cache: Path, path: Path, emit: str, shape_set: int, kernel: str = "attention") -> dict:
    env = {**os.environ, "PYTHONPATH": child_pythonpath(), "HELION_LS_ANALYSIS_CACHE": str(cache)}
    done = subprocess.run([sys.executable, "-c", CLI_COMPILE, str(path), emit, str(shape_set), kernel],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.asyncio
async def test_the_command_line_and_the_editor_share_what_they_found(tmp_path, two_kernels):
    cache = tmp_path / "analysis.sqlite"
    fresh = [cli_compile(tmp_path / "off.sqlite", two_kernels, "json", i) for i in (0, 1)]
    for i in (0, 1):  # helion-pallas compile keeps front and lowering results for the editor
        assert cli_compile(cache, two_kernels, "json", i)["out"] == fresh[i]["out"]
    srv = await start(cache, two_kernels.parent)
    try:
        uri = srv.open(two_kernels)
        await srv.final_diagnostics(uri, timeout=240)
        stats = await confirmed(srv, 2)
        assert stats["counts"]["recalled"] == 4  # attention's two shape sets: front and lowering
        assert stats["counts"]["replaced"] == 0  # compiled alike: the editor's fresh compile confirms them
        assert stats["counts"]["checks"] == 2  # only the add kernel's units are lowered
        await stop(srv)
    finally:
        await srv.stop()
    again = cli_compile(cache, two_kernels, "vmem", 1, "add")  # what the editor found for the add kernel
    assert again["torch"] is False and again["status"] == 0 and "fits" in again["out"]
    assert again["out"] == cli_compile(tmp_path / "off2.sqlite", two_kernels, "vmem", 1, "add")["out"]


CALLED = """import torch
import helion
import helion.language as hl


@helion.kernel()
def scale(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = x[tile] * 2.0
    return out


scale(torch.randn(4, 8, 128))
"""


@pytest.mark.asyncio
async def test_a_result_that_names_a_call_is_not_shown_again_once_the_call_has_moved(tmp_path):
    """The kernel's text is unchanged, but its shape set's call (which its error names and points at) moved:
    neither the reopened server's first publish nor any later one shows the call where it was."""
    ws = tmp_path / "ws"
    ws.mkdir()
    path = ws / "called.py"
    path.write_text(CALLED)
    cache = tmp_path / "analysis.sqlite"
    first, _ = await analyse(cache, path)
    call = "scale(torch.randn(4, 8, 128))"
    (rank,) = [d for d in first if d["code"] == "HPL105"]
    assert rank["relatedInformation"][0]["location"]["range"]["start"]["line"] == CALLED.count("\n") - 1
    assert f"at line {CALLED.count(chr(10))})" in rank["message"]

    moved = CALLED.replace(call, f"# three\n# more\n# lines\n{call}")
    srv = await start(cache, ws)
    try:
        uri = srv.open(path, moved)
        await srv.final_diagnostics(uri, timeout=240)
        await analysed(srv, uri)
        line = moved.count("\n") - 1
        for diags in published(srv, uri):
            for d in diags:
                if d["code"] == "HPL105":
                    assert d["relatedInformation"][0]["location"]["range"]["start"]["line"] == line, d
                    assert f"at line {line + 1})" in d["message"], d
        assert any(d["code"] == "HPL105" for d in published(srv, uri)[-1])
        await stop(srv)
    finally:
        await srv.stop()


UNSUPPORTED = """

# helion: args(x=f32[256, 512])
@helion.kernel()
def spectrum(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = torch.fft.fft(x[tile]).real
    return out
"""


def open_notebook(srv: RawServer, path: Path, cells: list[str]) -> tuple[str, list[str]]:
    """notebookDocument/didOpen of code cells (as VS Code sends it); the notebook's and the cells' URIs."""
    uris = [f"vscode-notebook-cell:{path}#W{i}" for i in range(len(cells))]
    srv.notify("notebookDocument/didOpen", {
        "notebookDocument": {"uri": path.as_uri(), "notebookType": "jupyter-notebook", "version": 1,
                             "cells": [{"kind": 2, "document": uri} for uri in uris]},
        "cellTextDocuments": [{"uri": uri, "languageId": "python", "version": 1, "text": text}
                              for uri, text in zip(uris, cells, strict=True)]})
    return path.as_uri(), uris


@pytest.mark.asyncio
async def test_a_notebooks_remembered_results_are_shown_on_the_cell_that_now_holds_the_kernel(tmp_path):
    """Another server analysed the notebook; a cell was added above the kernel's since. The recalled result
    is published on the kernel's cell, at its line there, and nowhere else."""
    ws = tmp_path / "ws"
    ws.mkdir()
    path = ws / "kernels.ipynb"
    header, kernel = ATTENTION.split("\n\n\n", 1)
    kernel += UNSUPPORTED  # a second kernel, with an error in its body (not anchored to a config or shape line)
    cache = tmp_path / "analysis.sqlite"

    async def session(cells: list[str]) -> tuple[RawServer, list[str]]:
        srv = await start(cache, ws)
        uri, cell_uris = open_notebook(srv, path, cells)
        await srv.wait(lambda: any(p["uri"] == uri and p["final"] for p in srv.of("helion/diagnosticsStage")), 240)
        return srv, cell_uris

    srv, (_, kernel_cell) = await session([header, kernel])
    try:
        first = published(srv, kernel_cell)[-1]
        assert {d["code"] for d in first} == {"HPL300", "HPL102"}
        await stop(srv)
    finally:
        await srv.stop()

    # a cell whose code no kernel reads (a module-level statement would be: every one is in the key)
    srv, (_, added, kernel_cell) = await session([header, "def unrelated():\n    return 1\n# another cell\n", kernel])
    try:
        stats = await srv.stats()
        assert stats["counts"]["recalled"] >= 1
        assert all(shown(diags) == shown(first) for diags in published(srv, kernel_cell)), published(srv, kernel_cell)
        assert not any(published(srv, added))
        await stop(srv)
    finally:
        await srv.stop()
