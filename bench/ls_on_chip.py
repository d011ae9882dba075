"""The language server's Tune lens as an editor drives it, on whatever machine this runs: on a TPU VM the
server's `auto` evaluator must measure on the chip and the lens must say so ("measured on TPU v5 lite"); on a
machine without a TPU of the chip it must fall back to the model and say "model estimate for v5e".

It starts `python -m helion_ls` over stdio (trusted workspace: a temporary copy of one example), waits for the
Tune lens, runs it for shape set 0 and polls the lenses until the Best lens arrives; prints the lens titles,
the tuning's end state and the seconds it took, and exits 1 when no Best lens came or it names the wrong
evidence.

    python bench/ls_on_chip.py [--file examples/softmax.py --kernel softmax --chip v5e --timeout 300]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

REPO = Path(__file__).resolve().parents[1]


async def lens_titles(client: LanguageClient, uri: str) -> list[str]:
    found = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    return [lens.command.title for lens in found or [] if lens.command is not None]


async def poll(client: LanguageClient, uri: str, want: str, deadline: float) -> list[str]:
    """The lens titles once one starts with `want`, or the last ones seen at the deadline."""
    titles: list[str] = []
    while time.monotonic() < deadline:
        titles = await lens_titles(client, uri)
        if any(t.startswith(want) for t in titles):
            break
        await asyncio.sleep(1.0)
    return titles


async def run(file: Path, kernel: str, chip: str, timeout: float) -> int:
    root = Path(tempfile.mkdtemp(prefix="ls-on-chip-"))
    ws = root / "ws"
    ws.mkdir()
    path = ws / file.name
    shutil.copy(file, path)
    client = LanguageClient("ls-on-chip", "1")
    states: list[Any] = []

    @client.feature("helion/tuningState")
    def on_state(params: Any) -> None:
        states.append(params)

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def on_refresh(_params: Any) -> None:
        return None

    messages: list[str] = []  # what the server tells the user (why tuning fell back to the model, ...)

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def on_message(params: types.ShowMessageParams) -> None:
        messages.append(params.message)

    for method in (types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, "helion/diagnosticsStage"):
        client.feature(method)(lambda _params: None)

    await client.start_io(sys.executable, "-m", "helion_ls")
    start = time.monotonic()
    deadline = start + timeout
    try:
        await client.initialize_async(types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            root_uri=ws.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=ws.as_uri(), name="ws")],
            initialization_options={"chip": chip, "evaluator": "auto", "workspaceTrusted": True,
                                    "storePath": str(root / "tuning.sqlite")},
        ))  # fmt: skip
        client.initialized(types.InitializedParams())
        uri = path.as_uri()
        client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=path.read_text())
        ))  # fmt: skip
        titles = await poll(client, uri, "Tune on", deadline)
        print(f"lenses after open ({time.monotonic() - start:.1f} s): {titles}")
        await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="helion.tune", arguments=[{"uri": uri, "kernel": kernel, "shapeSet": 0}]
        ))  # fmt: skip
        tuned = time.monotonic()
        titles = await poll(client, uri, "Best:", deadline)
        print(f"lenses after tuning ({time.monotonic() - tuned:.1f} s): {titles}")
        print(f"last tuning state: {states[-1] if states else None}")
        for message in messages:
            print(f"server message: {message}")
    finally:
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()
        shutil.rmtree(root, ignore_errors=True)
    best = next((t for t in titles if t.startswith("Best:")), None)
    if best is None:
        print("no Best lens arrived")
        return 1
    from compiler.tune.evidence import evidence
    from helion_ls.workers.machine_tpu import machine_tpu

    want = evidence("tpu" if machine_tpu().chip == chip else "model", chip)  # the words the server labels it with
    ok = want in best
    print(f"{'ok' if ok else 'WRONG'}: the Best lens should say {want!r}")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", default="examples/softmax.py")
    parser.add_argument("--kernel", default="softmax")
    parser.add_argument("--chip", default="v5e")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds for the whole session")
    args = parser.parse_args()
    return asyncio.run(run(REPO / args.file, args.kernel, args.chip, args.timeout))


if __name__ == "__main__":
    sys.exit(main())
