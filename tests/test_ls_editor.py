"""End to end, over the wire: what the editor shows for kernels that compile and kernels that do not.

Shape lines as written in lenses, hover tables whose numbers stay apart, Pallas code near the top of the
kernel hover, a hover that says why a saved kernel does not compile, generated-code requests for such a
kernel answered without a traceback in the log, and the model label on a best config that is current.
"""

from __future__ import annotations

import re

import pytest
import pytest_asyncio
from ls_wire import RawServer

import compiler
from compiler.tune.keys import TrialKey, shape_key
from compiler.tune.store import TuningStore

pytestmark = pytest.mark.asyncio(loop_scope="module")

LAYER_NORM = """import helion
import helion.language as hl
import torch


# helion: args(x=f32[128, 256], weight=f32[256], eps=1e-5)
@helion.kernel
def layer_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        acc = x[tile_m, :]
        mean = torch.mean(acc, dim=-1, keepdim=True)
        centered = acc - mean
        var = torch.mean(centered * centered, dim=-1, keepdim=True)
        out[tile_m, :] = centered * torch.rsqrt(var + eps) * weight[None, :]
    return out
"""

BROKEN = """import helion
import helion.language as hl
import torch


# helion: args(x=f32[256, 256])
@helion.kernel
def scale(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = torch.linalg.svd(x[tile])[0]
    return out
"""


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def server(tmp_path_factory):
    ws = tmp_path_factory.mktemp("editor") / "ws"
    ws.mkdir()
    srv = await RawServer.start()
    srv.ws = ws
    await srv.initialize(ws, libtpu=False, workspaceTrusted=True)
    yield srv
    await srv.stop()


async def open_compiled(server: RawServer, name: str, text: str) -> str:
    path = server.ws / name
    path.write_text(text)
    uri = server.open(path)
    await server.final_diagnostics(uri)
    return uri


async def lens_titles(server: RawServer, uri: str) -> list[str]:
    reply = await server.request("textDocument/codeLens", {"textDocument": {"uri": uri}})
    return [lens["command"]["title"] for lens in reply["result"]]


async def hover_text(server: RawServer, uri: str, text: str, needle: str, offset: int) -> str:
    at = text.index(needle) + offset
    line, character = text[:at].count("\n"), at - (text.rfind("\n", 0, at) + 1)
    reply = await server.request(
        "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}
    )
    assert reply.get("result"), reply
    return reply["result"]["contents"]["value"]


NUMERIC = re.compile(r"^[\d.,]+(?: ?[KMG]i?B| B)?$")


def adjacent_numeric_cells(markdown: str) -> list[str]:
    """Table rows where two neighbouring cells are both bare numbers (they read as one value)."""
    bad = []
    for row in markdown.splitlines():
        if not row.startswith("|") or set(row) <= set("|-: "):
            continue
        cells = [c.strip() for c in row.strip("|").split("|")]
        if any(NUMERIC.match(a) and NUMERIC.match(b) for a, b in zip(cells, cells[1:], strict=False)):
            bad.append(row)
    return bad


async def test_lens_prints_scalar_arguments_as_written(server):
    uri = await open_compiled(server, "layer_norm.py", LAYER_NORM)
    titles = await lens_titles(server, uri)
    assert titles[0] == "x: f32[128, 256]  weight: f32[256]  eps: 1e-5", titles


async def test_kernel_hover_shows_pallas_first_and_keeps_numbers_apart(server):
    uri = await open_compiled(server, "layer_norm.py", LAYER_NORM)
    text = await hover_text(server, uri, LAYER_NORM, "def layer_norm", 5)
    lines = text.splitlines()
    first_code = lines.index("```python")
    # title, shape set, config and the time line, then the code: before the VMEM bar and table
    assert first_code <= 10, lines[: first_code + 1]
    assert text.index("```python") < text.index("VMEM `")
    assert "| buffer |" in text and not adjacent_numeric_cells(text), adjacent_numeric_cells(text)
    access = await hover_text(server, uri, LAYER_NORM, "x[tile_m, :]", 1)
    assert "| 0 |" in access and not adjacent_numeric_cells(access), adjacent_numeric_cells(access)


async def test_hover_on_a_kernel_that_does_not_compile_says_why(server):
    uri = await open_compiled(server, "broken.py", BROKEN)
    diags = [d for d in (await server.final_diagnostics(uri)) if d["severity"] == 1]
    assert diags, "the kernel was expected not to compile"
    text = await hover_text(server, uri, BROKEN, "def scale", 5)
    assert "Not compiled (yet)" not in text
    assert "Does not compile" in text and diags[0]["code"] in text
    assert diags[0]["message"].split(" [")[0][:60] in text


async def test_generated_code_of_a_broken_kernel_logs_no_traceback(server):
    uri = await open_compiled(server, "broken.py", BROKEN)
    before = len(server.stderr)
    notes_before = len(server.notes)
    for _ in range(3):  # the view refreshes on every save
        reply = await server.request("helion/generatedCode", {"uri": uri, "kernel": "scale", "shapeSet": 0})
        assert reply["error"]["code"] == -32803, (reply, server.stderr[-20:])
        assert "does not compile" in reply["error"]["message"]
    await server.stats()
    logged = server.stderr[before:]
    assert not [line for line in logged if "Traceback" in line or " ERROR " in line], logged
    assert len([line for line in logged if "generatedCode" in line or "does not compile" in line]) <= 3
    to_client = [n for n in server.notes[notes_before:] if n["method"] in ("window/logMessage", "window/showMessage")]
    assert not [n for n in to_client if n["params"]["type"] == 1], to_client


async def test_best_lens_keeps_the_model_label_when_the_config_is_current(server):
    applied = LAYER_NORM.replace("@helion.kernel\n", "@helion.kernel(config=helion.Config(block_sizes=[64]))\n")
    kernel = compiler.load(applied).kernels["layer_norm"]
    key = TrialKey(kernel.source_hash, shape_key(kernel.shape_sets[0]), "v7x", "model")
    with TuningStore(server.ws.parent / "store.sqlite") as store:
        store.record_trial(key, {"block_sizes": [64]}, 2.0e-6, "ok", {"gbps": 300.0})
        store.record_trial(key, {"block_sizes": [8]}, 5.0e-6, "ok", {"gbps": 120.0})
    uri = await open_compiled(server, "applied.py", applied)
    titles = await lens_titles(server, uri)
    best = [t for t in titles if t.startswith("Best:")]
    assert best and "(current)" in best[0] and best[0].endswith("[model estimate for v7x]"), titles
