"""One answer everywhere: the language server and `helion-pallas compile` say the same of a file — the same
diagnostics (code, severity, line) for every kernel and shape set — on user-style kernels (the LS seeds) and on
kernels declared the way vLLM declares its Helion ops (tests/kernels/vllm_style, written for these tests)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_ls_support import end_session, final_diagnostics, make_workspace, open_doc, server_config, start

import compiler
from compiler import cli

pytestmark = pytest.mark.asyncio(loop_scope="module")
CHIP = "v5e"
VLLM_STYLE = Path(__file__).parent / "kernels" / "vllm_style"
SEEDS = ["add.py", "softmax.py", "bmm.py", "batch_softmax.py", "rms_norm_bwd.py", "attention.py"]
SEVERITY = {1: "error", 2: "warning", 3: "information", 4: "hint"}
# more files to compare, e.g. vLLM's op files fetched outside the repo: HELION_SAME_EXTRA=/path/to/dir
EXTRA = Path(os.environ["HELION_SAME_EXTRA"]) if os.environ.get("HELION_SAME_EXTRA") else None


WRAPPER = """import helion


def tpu_kernel(**settings):
    def decorate(fn):
        return helion.kernel(**settings)(fn)

    return decorate
"""
WRAPPED = """import helion
import helion.language as hl
import torch
from wslib import tpu_kernel


# helion: args(x=f32[8, 256])
@tpu_kernel(static_shapes=True, config=helion.Config(block_sizes=[8, 32]))
def twice(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.shape):
        out[tile] = x[tile] * 2
    return out
"""


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    ws = make_workspace(tmp_path_factory.mktemp("same"))
    for f in VLLM_STYLE.glob("*.py"):
        shutil.copy(f, ws / f.name)
    if EXTRA is not None:
        shutil.copytree(EXTRA, ws / "extra")
    (ws / "wslib").mkdir()  # a wrapper of the workspace: the server must read it from where the file is
    (ws / "wslib" / "__init__.py").write_text("from .wrap import tpu_kernel\n")
    (ws / "wslib" / "wrap.py").write_text(WRAPPER)
    (ws / "wrapped.py").write_text(WRAPPED)
    lsp_client.ws = ws
    await start(lsp_client, ws, libtpu=False, chip=CHIP)
    yield
    await end_session(lsp_client)


def cli_diagnostics(path: Path) -> set[tuple[str, str, int]]:
    """(severity, code, line) of everything `helion-pallas compile --emit json` says of each kernel and shape
    set of `path`, and of the file (what it prints on stderr)."""
    module = compiler.load(path)
    out: set[tuple[str, str, int]] = set()
    runs = [["-k", name, "--shape-set", str(index)] for name, kernel in module.kernels.items()
            for index in range(max(1, len(kernel.shape_sets)))] or [[]]  # no kernel: what the file says
    for run in runs:
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            cli.main(["compile", str(path), *run, "--chip", CHIP, "--emit", "json"])
        text = stdout.getvalue()
        start = text.find("{")
        if start >= 0:
            for d in json.loads(text[start:])["diagnostics"]:
                out.add((d["severity"], d["code"], d["range"]["start"]["line"]))
        for line in stderr.getvalue().splitlines():
            parts = line.split(": ")
            if len(parts) >= 3 and parts[1].split(" ")[-1].startswith("HPL"):
                severity, code = parts[1].split(" ")
                out.add((severity, code, int(parts[0].split(":")[-2]) - 1))
    return out


def _extra() -> list[str]:
    if EXTRA is None:
        return []
    return sorted(str(Path("extra") / p.relative_to(EXTRA)) for p in EXTRA.rglob("*.py") if "ops" in p.parts)


@pytest.mark.parametrize("name", SEEDS + sorted(p.name for p in VLLM_STYLE.glob("*.py")) + ["wrapped.py"] + _extra())
async def test_the_cli_and_the_language_server_say_the_same(client: LanguageClient, name: str):
    path = client.ws / name
    uri = open_doc(client, path)
    ls = {(SEVERITY[d.severity], d.code, d.range.start.line) for d in await final_diagnostics(client, uri, 1, 180)}
    cli_says = cli_diagnostics(path)
    assert ls == cli_says, f"only the LS: {sorted(ls - cli_says)}; only the CLI: {sorted(cli_says - ls)}"
    if name in ("wrapped.py", "scaled_rows.py", "alias_and_branch.py"):
        assert ls, "these files have diagnostics: an empty answer from both would prove nothing"


async def test_the_editor_shows_a_generators_cases_on_lenses_and_the_declaration_on_hover(client: LanguageClient):
    path = client.ws / "scaled_rows.py"
    text = path.read_text()
    uri = open_doc(client, path)
    await final_diagnostics(client, uri, 1, 180)
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    titles = " | ".join(lens.command.title for lens in lenses if lens.command)
    for case in ("width=256, rows=8", "width=256, rows=64", "width=512, rows=128"):
        assert f"case {case} of make_cases()" in titles, titles
    assert "rows=16" not in titles  # 3 of the 8 cases, not all of them
    at = text.index("def scaled_rows(") + len("def ")
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=text[:at].count("\n"), character=at - (text.rfind("\n", 0, at) + 1))))
    value = hover.contents.value
    assert "Declared with `register_kernel`" in value and "3 of the 8 cases of `make_cases()`" in value
    assert "case width=512, rows=128 of `make_cases()`" in value
