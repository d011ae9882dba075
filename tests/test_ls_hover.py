"""End to end: hovers on a kernel, a tensor access and tile loops, checked against the compiler's own plan."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_ls_support import end_session, make_workspace, open_doc, server_config, stage_diagnostics, start

import compiler

pytestmark = pytest.mark.asyncio(loop_scope="module")
PIPELINE = 'config=helion.Config(block_sizes=[1, 256, 512], pallas_loop_type="emit_pipeline")'


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    ws = make_workspace(tmp_path_factory.mktemp("hover"))
    await start(lsp_client, ws, libtpu=False)
    text = (
        (ws / "attention.py")
        .read_text()
        .replace("@helion.kernel(static_shapes=True)", f"@helion.kernel(static_shapes=True, {PIPELINE})")
    )
    (ws / "attention.py").write_text(text)
    lsp_client.text = text
    lsp_client.uri = open_doc(lsp_client, ws / "attention.py", text)
    await stage_diagnostics(lsp_client, lsp_client.uri, 1, "front")
    yield
    await end_session(lsp_client)


def compiled(text: str, index: int):
    kernel = compiler.load(text).kernels["attention"]
    return kernel.compile(args=kernel.shape_sets[index], chip="v7x")


async def hover(client: LanguageClient, needle: str, offset: int = 0, text: str | None = None,
                uri: str | None = None) -> types.Hover | None:
    text = client.text if text is None else text
    at = text.index(needle) + offset
    line = text[:at].count("\n")
    character = at - (text.rfind("\n", 0, at) + 1)
    return await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri or client.uri),
            position=types.Position(line=line, character=character),
        )
    )


async def test_kernel_hover_has_config_vmem_and_generated_code_per_shape_set(client: LanguageClient):
    result = await hover(client, "def attention", 5)
    assert result is not None
    text = result.contents.value
    assert text.startswith("**attention** — Helion kernel → Pallas on **v7x**")
    for index in (0, 1):
        ck = compiled(client.text, index)
        assert f"#### Shape set {index}: `{compiler.ir.specs.format_args(ck.args)}`" in text
        assert f"Config (from the decorator): `{ck.config!r}`" in text
        for row in ck.vmem.rows:
            assert f"| `{row.name}` | {row.role} |" in text
    assert text.count("Device kernel:") == 2 and text.count("`pallas_call` site:") == 2
    assert "pl.pallas_call(" in text and "pltpu.emit_pipeline" in text
    assert text.count("command:helion-ls.showGeneratedCode?") == 2
    assert "█" in text and "fits" in text
    name_line = client.text[: client.text.index("def attention")].count("\n")
    assert result.range.start.line == name_line and result.range.start.character == 4


async def test_decorator_hover_is_the_kernel_hover(client: LanguageClient):
    result = await hover(client, "helion.kernel(static_shapes=True", 3)
    assert result is not None and result.contents.value.startswith("**attention**")


async def test_access_hover_shows_blockspec_memory_and_bytes(client: LanguageClient):
    result = await hover(client, "k_view[tile_b, tile_n, :]", 2)
    assert result is not None
    text = result.contents.value
    assert text.startswith("**k_view** — load of a tensor block")
    for index in (0, 1):
        ck = compiled(client.text, index)
        access = next(a for a in ck.plan.accesses if a.tensor == "k_view")
        call = ck.plan.calls[0]
        op = next(o for o in call.operands if o.name == access.operand)
        row = next(r for r in ck.vmem.rows if r.name == op.tensor)
        assert op.memory == "hbm"
        block = "(" + ", ".join("–" if d is None else str(d) for d in op.block_shape) + ")"
        assert f"| {index} | {block} of (" in text
        assert f"×{op.buffer_count} | `{op.index_map}` | HBM + pipeline |" in text
        assert row.bytes > 0
    assert "`pltpu.emit_pipeline` streams blocks into VMEM" in text
    line = client.text[: client.text.index("k_view[tile_b, tile_n, :]")].count("\n")
    assert result.range.start.line == line


async def test_tile_loop_hovers(client: LanguageClient):
    outer = await hover(client, "hl.tile([q_view.size(0), m_dim])", 3)
    assert outer is not None
    text = outer.contents.value
    assert text.startswith("**hl.tile** — launch grid (outermost loop)")
    ck = compiled(client.text, 1)
    grid = next(lp for lp in ck.plan.loops if lp.kind == "grid")
    assert (
        f"| 1 | {tuple(grid.extents)} | 1 (block_sizes[0]), 256 (block_sizes[1]) | {tuple(grid.steps)} |".replace(
            ",)", ")"
        )
        in text.replace(",)", ")")
    )
    inner = await hover(client, "hl.tile(n_dim)", 3)
    assert inner is not None
    assert "inner device loop" in inner.contents.value and "`emit_pipeline`" in inner.contents.value
    assert "512 (block_sizes[2])" in inner.contents.value


ODD_ROWS = """import helion
import helion.language as hl
import torch


# helion: args(x=f32[1000, 3000])
@helion.kernel(config=helion.Config(block_sizes=[128, 1024], pallas_loop_type="unroll"))
def row_max(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        acc = hl.full([tile_m], float("-inf"), dtype=torch.float32)
        for tile_n in hl.tile(n):
            acc = torch.maximum(acc, torch.amax(x[tile_m, tile_n], 1))
        out[tile_m] = acc
    return out
"""


async def test_partial_tile_hovers_name_the_masked_tail(client: LanguageClient):
    folder = Path(url2pathname(urlparse(client.uri).path)).parent
    uri = open_doc(client, folder / "odd_rows.py", ODD_ROWS)
    await stage_diagnostics(client, uri, 1, "front")
    outer = await hover(client, "hl.tile(m)", 3, ODD_ROWS, uri)
    assert outer is not None and "masked tail: 1000 = 7×128 + 104" in outer.contents.value
    inner = await hover(client, "hl.tile(n)", 3, ODD_ROWS, uri)
    assert inner is not None and "masked tail: 3000 = 2×1024 + 952" in inner.contents.value
    assert "masked tail" not in (await hover(client, "hl.tile([q_view.size(0), m_dim])", 3)).contents.value


async def test_no_hover_outside_kernels_and_on_plain_code(client: LanguageClient):
    assert await hover(client, "import math") is None
    assert await hover(client, "def reference", 5) is None


SEGMENT_ROWS = """import helion
import helion.language as hl
import torch


# helion: args(x=f32[48, 128], offsets=i32[4])
@helion.kernel(config=helion.Config(block_sizes=[16], pallas_loop_type="unroll"))
def segment_add(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for g in hl.grid(offsets.size(0) - 1):
        for t in hl.tile(offsets[g], offsets[g + 1]):
            out[t, :] = x[t, :] + 1.0
    return out
"""


async def test_device_bounded_loop_hover_says_bounds_are_computed_on_the_device(client: LanguageClient):
    folder = Path(url2pathname(urlparse(client.uri).path)).parent
    uri = open_doc(client, folder / "segment_rows.py", SEGMENT_ROWS)
    await stage_diagnostics(client, uri, 1, "front")
    inner = await hover(client, "hl.tile(offsets[g]", 3, SEGMENT_ROWS, uri)
    assert inner is not None
    text = inner.contents.value
    assert "| (on device) | 16 (block_sizes[0]) | (on device) | `fori_loop` |" in text
    assert "bounds computed on the device" in text and "`unroll` was asked for" in text


async def test_kernel_hover_says_which_int64_arguments_are_read_as_int32(client: LanguageClient):
    text = SEGMENT_ROWS.replace("offsets=i32[4]", "offsets=i64[4]")
    folder = Path(url2pathname(urlparse(client.uri).path)).parent
    uri = open_doc(client, folder / "segment_rows_int64.py", text)
    await stage_diagnostics(client, uri, 1, "front")
    result = await hover(client, "def segment_add", 5, text, uri)
    assert result is not None
    assert "Int64 `offsets` is read as int32" in result.contents.value
    assert "raises OverflowError" in result.contents.value
