"""End to end: helion/generatedCode (full module + source map), helion/kernelAt, and their errors."""

from __future__ import annotations

import urllib.parse

import pytest
import pytest_lsp
from pytest_lsp import LanguageClient
from test_ls_support import (
    end_session,
    make_workspace,
    open_doc,
    request,
    server_config,
    stage_diagnostics,
    start,
)

import compiler

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    ws = make_workspace(tmp_path_factory.mktemp("generated"))
    lsp_client.ws = ws
    await start(lsp_client, ws, libtpu=False)
    yield
    await end_session(lsp_client)


async def test_generated_module_and_source_map_match_the_compiler(client: LanguageClient):
    path = client.ws / "rms_norm_bwd.py"
    text = "# a comment that moves everything down\n\n" + path.read_text()
    uri = open_doc(client, path, text)
    await stage_diagnostics(client, uri, 1, "front")
    got = await request(client, "helion/generatedCode", {"uri": uri, "kernel": "rms_norm_bwd", "shapeSet": 0})
    kernel = compiler.load(text, path.name).kernels["rms_norm_bwd"]
    ck = kernel.compile(args=kernel.shape_sets[0], chip="v7x")
    assert got["source"] == ck.source
    assert got["kernel"] == "rms_norm_bwd" and got["shapeSet"] == 0 and got["chip"] == "v7x"
    assert got["config"] == ck.config.to_json()
    assert got["vmem"]["total_bytes"] == ck.vmem.total_bytes and got["vmem"]["verdict"] == ck.vmem.verdict
    assert len(got["sourceMap"]) == len(ck.source_map) > 0
    for entry, (line, rng) in zip(got["sourceMap"], ck.source_map, strict=True):
        assert entry["line"] == line
        assert entry["range"]["start"]["line"] == rng.start.line  # ASCII source: same columns too
        assert entry["range"]["start"]["character"] == rng.start.character
    lines = text.splitlines()
    mapped = {lines[e["range"]["start"]["line"]].strip().split()[0] for e in got["sourceMap"]}
    assert "for" in mapped  # the tile loop is mapped to its own line in the document
    scheme, rest = got["uri"].split(":", 1)
    assert scheme == "helion-pallas"
    path_part, query = rest.split("?", 1)
    assert path_part == f"{path}.rms_norm_bwd.0.pallas.py"
    assert urllib.parse.parse_qs(query) == {"uri": [uri], "kernel": ["rms_norm_bwd"], "shapeSet": ["0"]}


async def test_generated_code_compiles_on_demand_after_an_edit(client: LanguageClient):
    path = client.ws / "add.py"
    uri = open_doc(client, path)
    got = await request(client, "helion/generatedCode", {"uri": uri, "kernel": "add", "shapeSet": 1})
    assert "pl.pallas_call(" in got["source"] and "16384" in got["source"]


async def test_generated_code_errors(client: LanguageClient):
    path = client.ws / "softmax.py"
    bad = path.read_text().replace("x[tile_n, :]", "x[tile_n, :, :]")
    uri = open_doc(client, path, bad)
    with pytest.raises(Exception, match=r"does not compile: HPL\d+"):
        await request(client, "helion/generatedCode", {"uri": uri, "kernel": "softmax", "shapeSet": 0})
    with pytest.raises(Exception, match="shapeSet must be 0..1"):
        await request(client, "helion/generatedCode", {"uri": uri, "kernel": "softmax", "shapeSet": 5})
    with pytest.raises(Exception, match="no Helion kernel 'nope'"):
        await request(client, "helion/generatedCode", {"uri": uri, "kernel": "nope", "shapeSet": 0})
    with pytest.raises(Exception, match="not open"):
        await request(client, "helion/generatedCode", {"uri": uri + "x", "kernel": "softmax", "shapeSet": 0})


async def test_kernel_at(client: LanguageClient):
    path = client.ws / "attention.py"
    text = path.read_text()
    uri = open_doc(client, path, text)
    await stage_diagnostics(client, uri, 1, "front")

    def at(needle: str) -> dict:
        line = text[: text.index(needle)].count("\n")
        return {"uri": uri, "position": {"line": line, "character": 2}}

    assert await request(client, "helion/kernelAt", at("acc = hl.zeros")) == {
        "kernel": "attention",
        "shapeSet": 0,
        "uri": uri,
    }
    assert await request(client, "helion/kernelAt", at("# helion: args(q=bf16[8, 32, 32768")) == {
        "kernel": "attention",
        "shapeSet": 1,
        "uri": uri,
    }
    assert await request(client, "helion/kernelAt", at("def reference")) is None
    assert (
        await request(
            client, "helion/kernelAt", {"uri": "file:///nowhere.py", "position": {"line": 0, "character": 0}}
        )
        is None
    )
