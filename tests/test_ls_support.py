"""Shared pieces of the language-server end-to-end tests (no tests here).

Every ls test module starts the real server (`python -m helion_ls`) once, as a client would, in a fresh
workspace holding copies of the seed kernels and its own tuning store. The test client answers
workspace/applyEdit (applying the edit to its copy of the text) and workspace/codeLens/refresh, and
records the server's custom notifications so tests can wait for them.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from conftest import child_pythonpath
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

REPO = Path(__file__).resolve().parent.parent
SEEDS = REPO / "tests" / "test_ls_seeds"  # verbatim copies of the seed kernels, as <name>.py.txt
SERVER = [sys.executable, "-m", "helion_ls", "--log-level", "INFO"]


def _attr(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


class Recorder:
    """Custom notifications and client-side requests the server sent, with waiting."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self.edits: list[types.WorkspaceEdit] = []
        self.refreshes = 0
        self.texts: dict[str, str] = {}  # uri -> text as the client has it (edits applied)
        self._changed = asyncio.Event()

    def add(self, method: str, params: Any) -> None:
        self.events.append((method, params))
        self._changed.set()

    def of(self, method: str) -> list[Any]:
        return [p for m, p in self.events if m == method]

    async def wait(self, predicate: Callable[[], Any], timeout: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"condition not met within {timeout} s; last events: {self.events[-5:]}")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.5))
            except TimeoutError:
                pass


def make_client() -> LanguageClient:
    client = LanguageClient(converter_factory=default_converter)
    defaults = dict(DEFAULT_CLIENT_FEATURES)
    defaults.pop(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    register_lsp_features(client, defaults)
    rec = Recorder()
    client.recorder = rec  # type: ignore[attr-defined]

    for method in ("helion/diagnosticsStage", "helion/tuningState", "helion/machine"):

        def on_note(params: Any, method: str = method) -> None:
            rec.add(method, params)

        client.feature(method)(on_note)

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        rec.edits.append(params.edit)
        for change in params.edit.document_changes or []:
            uri = change.text_document.uri
            rec.texts[uri] = apply_text_edits(rec.texts.get(uri, ""), change.edits)
        for uri, edits in (params.edit.changes or {}).items():
            rec.texts[uri] = apply_text_edits(rec.texts.get(uri, ""), edits)
        rec.add("applyEdit", params)
        return types.ApplyWorkspaceEditResult(applied=True)

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def refresh(params: Any) -> None:
        rec.refreshes += 1
        rec.add("codeLens/refresh", None)

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def diagnostics(params: types.PublishDiagnosticsParams) -> None:
        client.diagnostics[params.uri] = params.diagnostics
        rec.add("diagnostics", params)

    return client


SHUTDOWN_SECONDS = 60  # a server that has not exited by then hangs; the test's own timeout would take 600 s


async def end_session(client: LanguageClient) -> None:
    """Shut the server down and wait for it to exit, as pytest-lsp does, but not forever: a server hanging at
    exit (as one once did in asyncio.run's teardown) is killed and fails the test that ended its session, instead
    of pytest-timeout killing the whole xdist worker ten minutes later."""
    try:
        await asyncio.wait_for(client.shutdown_session(), SHUTDOWN_SECONDS)
    except TimeoutError:
        server = client._server  # noqa: SLF001 - pytest-lsp keeps the server's process there
        if server is not None and server.returncode is None:
            server.kill()
        pytest.fail(f"the language server did not exit within {SHUTDOWN_SECONDS} s of the client's shutdown and exit")


def server_config(**env: str) -> ClientServerConfig:
    return ClientServerConfig(
        server_command=SERVER,
        client_factory=make_client,
        server_env={**os.environ, "PYTHONPATH": child_pythonpath(), **env},
    )


def make_workspace(root: Path) -> Path:
    ws = root / "ws"
    ws.mkdir()
    for seed in SEEDS.glob("*.py.txt"):
        shutil.copy(seed, ws / seed.name.removesuffix(".txt"))
    return ws


async def start(
    client: LanguageClient, ws: Path, capabilities: types.ClientCapabilities | None = None, **options: Any
) -> types.InitializeResult:
    """Initialize as a client whose workspace is trusted (pass workspaceTrusted=False or None to differ); by
    default with the capabilities VS Code states. The chip is v7x unless a test names another: `auto` (the
    editor's default) is this machine's TPU on a TPU VM, and these tests expect the model's figures for v7x
    on every machine (test_ls_workspace.py and test_ls_machine_tpu.py test `auto`)."""
    options = {"workspaceTrusted": True, "chip": "v7x", **options}
    return await client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities or pytest_lsp.client_capabilities("visual-studio-code"),
            root_uri=ws.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=ws.as_uri(), name="ws")],
            initialization_options={"storePath": str(ws.parent / "store" / "tuning.sqlite"), **options},
        )
    )


def rec(client: LanguageClient) -> Recorder:
    return client.recorder  # type: ignore[attr-defined]


def apply_text_edits(text: str, edits: Any) -> str:
    """Apply LSP text edits (UTF-16 positions) to text, last first."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(pos: types.Position) -> int:
        if pos.line >= len(lines):
            return len(text)
        line = lines[pos.line]
        units = 0
        for i, ch in enumerate(line):
            if units >= pos.character:
                return starts[pos.line] + i
            units += 2 if ord(ch) > 0xFFFF else 1
        return starts[pos.line] + len(line)

    spans = sorted(((offset(e.range.start), offset(e.range.end), e.new_text) for e in edits), reverse=True)
    for start_, end_, new in spans:
        text = text[:start_] + new + text[end_:]
    return text


_versions: dict[str, int] = {}


def open_doc(client: LanguageClient, path: Path, text: str | None = None) -> str:
    uri = path.as_uri()
    text = path.read_text() if text is None else text
    _versions[uri] = 1
    rec(client).texts[uri] = text
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
        )
    )
    return uri


def change_doc(client: LanguageClient, uri: str, text: str) -> int:
    """Replace the whole text (one full-content change); returns the new version."""
    _versions[uri] = _versions.get(uri, 1) + 1
    rec(client).texts[uri] = text
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=_versions[uri]),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )
    return _versions[uri]


def save_doc(client: LanguageClient, uri: str) -> None:
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )


def close_doc(client: LanguageClient, uri: str) -> None:
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )


def version_of(uri: str) -> int:
    return _versions[uri]


async def final_diagnostics(client: LanguageClient, uri: str, version: int, timeout: float = 120.0) -> list:
    """Diagnostics once the server says the last stage for `version` was published."""
    r = rec(client)

    def done() -> bool:
        return any(
            _attr(p, "uri") == uri and _attr(p, "version") == version and _attr(p, "final")
            for p in r.of("helion/diagnosticsStage")
        )

    await r.wait(done, timeout)
    published = [p for p in r.of("diagnostics") if p.uri == uri and p.version == version]
    return list(published[-1].diagnostics)


async def stage_diagnostics(
    client: LanguageClient, uri: str, version: int, stage: str, timeout: float = 60.0
) -> list:
    """Diagnostics as published right after `stage` for `version`."""
    r = rec(client)

    def index() -> int | None:
        for i, (m, p) in enumerate(r.events):
            if m == "helion/diagnosticsStage" and _attr(p, "uri") == uri and _attr(p, "version") == version:
                if _attr(p, "stage") == stage:
                    return i + 1  # events are 1-based here so 0 means "not yet"
        return None

    i = await r.wait(index, timeout)
    before = [p for m, p in r.events[: i - 1] if m == "diagnostics" and p.uri == uri and p.version == version]
    return list(before[-1].diagnostics)


def line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n")


def attr(obj: Any, name: str) -> Any:
    return _attr(obj, name)


def plain(obj: Any) -> Any:
    """pygls hands custom results over as namedtuples; turn them back into dicts and lists."""
    if hasattr(obj, "_asdict"):
        return {k: plain(v) for k, v in obj._asdict().items()}
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [plain(v) for v in obj]
    return obj


async def request(client: LanguageClient, method: str, params: Any) -> Any:
    return plain(await client.protocol.send_request_async(method, params))


# A one-op kernel the in-process compile-pool tests compile (tests/test_ls_cold_start.py, test_ls_foreground.py).
TWICE = """import helion
import helion.language as hl
import torch


# helion: args(x=f32[64, 128])
@helion.kernel
def twice(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] * 2.0
    return out
"""


async def until(predicate: Callable[[], Any], seconds: float = 120.0) -> None:
    """Poll `predicate` every 0.05 s until it holds; fail after `seconds`."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def shut_down_pool(pool: Any) -> None:
    """Shut an in-process `helion_ls.workers.compile_pool.CompilePool` down and reap its worker processes."""
    children = [w._proc for w in pool.workers if w._proc is not None]
    pool.shutdown()
    await asyncio.gather(*(child.wait() for child in children))
