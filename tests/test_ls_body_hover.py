"""End to end: every name, call and subscript of a kernel body answers a hover, and the hovers users asked for
say what the compiler did: a torch call (what it becomes, the VMEM a reduction takes), hl.register_block_size
(the block size, where it comes from, its legal values) and a block read only for its shape (not loaded)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import pytest_lsp
from conftest import EXAMPLES, MORE_KERNELS, SHARED_KERNELS
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_ls_support import (
    SEEDS,
    end_session,
    make_workspace,
    open_doc,
    server_config,
    stage_diagnostics,
    start,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

# upstream Helion's examples/rms_norm.py forward, with two shape sets
RMS_NORM = '''import helion
import helion.language as hl
import torch


# helion: args(x=f32[2048, 4096], weight=f32[4096], eps=1e-5)
# helion: args(x=f32[512, 8192], weight=f32[8192], eps=1e-5)
@helion.kernel
def rms_norm_fwd(
    x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5
) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.size()
    assert weight.size(0) == n, f"weight size mismatch {weight.size(0)} != {n}"
    out = torch.empty_like(x)
    inv_rms = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        x_tile = x[tile_m, :].to(torch.float32)
        x_squared = x_tile * x_tile
        mean_x_squared = torch.mean(x_squared, dim=-1)
        inv_rms_tile = torch.rsqrt(mean_x_squared + eps)
        normalized = x_tile * inv_rms_tile[:, None]
        out[tile_m, :] = (normalized * weight[:].to(torch.float32)).to(out.dtype)
        inv_rms[tile_m] = inv_rms_tile.to(out.dtype)
    return out, inv_rms
'''
SOFTMAX = (MORE_KERNELS / "softmax_two_pass.py").read_text()
WELFORD = (MORE_KERNELS / "welford_layer_norm.py").read_text()


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    ws = make_workspace(tmp_path_factory.mktemp("body_hover"))
    lsp_client.ws = ws
    await start(lsp_client, ws, libtpu=False, compilerCheck="off")
    yield
    await end_session(lsp_client)


async def opened(client: LanguageClient, name: str, text: str) -> str:
    path = client.ws / name
    path.write_text(text)
    uri = open_doc(client, path, text)
    await stage_diagnostics(client, uri, 1, "front", timeout=120)
    return uri


async def hover_at(client: LanguageClient, uri: str, line: int, character: int) -> types.Hover | None:
    return await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=character)))


async def hover(client: LanguageClient, uri: str, text: str, needle: str, offset: int = 0) -> str:
    at = text.index(needle) + offset
    line = text[:at].count("\n")
    found = await hover_at(client, uri, line, at - (text.rfind("\n", 0, at) + 1))
    assert found is not None, needle
    return found.contents.value


def body_tokens(text: str) -> list[tuple[str, int, int]]:
    """(token text, line, character) for every name, attribute, call and subscript of every kernel's body: a
    name at its start, an attribute at its attribute's first character, a call or subscript just after its
    closing bracket (where no smaller expression holds the position)."""
    out = []
    for fn in ast.walk(ast.parse(text)):
        if not isinstance(fn, ast.FunctionDef) or not any("helion.kernel" in ast.unparse(d) for d in fn.decorator_list):
            continue
        for stmt in fn.body:
            for n in ast.walk(stmt):
                if isinstance(n, ast.Name):
                    out.append((n.id, n.lineno - 1, n.col_offset))
                elif isinstance(n, ast.Attribute):
                    out.append((ast.unparse(n), n.end_lineno - 1, n.end_col_offset - len(n.attr)))
                elif isinstance(n, ast.Call | ast.Subscript):
                    out.append((ast.unparse(n), n.end_lineno - 1, n.end_col_offset))
    return out


def seed_kernels() -> list[Path]:
    """The six shared kernels as users write them (their verbatim copies where the shared folder is absent)."""
    if SHARED_KERNELS.is_dir():
        return sorted(SHARED_KERNELS.glob("*.py"))
    return sorted(SEEDS.glob("*.py.txt"))


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.py")) + seed_kernels(), ids=lambda p: f"{p.parent.name}/{p.name}")
async def test_every_name_call_and_subscript_of_a_kernel_body_answers(client: LanguageClient, path: Path):
    text = path.read_text()
    name = f"{path.parent.name}_{path.name.removesuffix('.txt')}"
    uri = await opened(client, name, text)
    tokens = body_tokens(text)
    assert len(tokens) > 20, tokens
    empty, unevaluated = [], []
    for token, line, character in tokens:
        found = await hover_at(client, uri, line, character)
        if found is None or not found.contents.value.strip():
            empty.append((line + 1, character, token))
        elif "not evaluated when compiling" in found.contents.value:
            unevaluated.append((line + 1, character, token))
    assert not empty, f"{len(empty)} of {len(tokens)} tokens answer no hover: {empty[:20]}"
    assert not unevaluated, unevaluated  # every token of these kernels runs when compiling


async def test_a_torch_reduction_says_what_it_becomes_and_the_vmem_it_takes(client: LanguageClient):
    uri = await opened(client, "rms_norm_fwd.py", RMS_NORM)
    text = await hover(client, uri, RMS_NORM, "torch.mean(x_squared", 7)
    assert text.startswith("**`torch.mean(x_squared, dim=-1)`**"), text
    assert "#### Shape set 0 (`x=f32[2048, 4096]" in text and "#### Shape set 1 (`x=f32[512, 8192]" in text, text
    assert "Spelled in jax: `jnp.mean(x_squared, axis=1)`" in text, text
    assert "Reduces f32[" in text and "live together while it runs" in text, text
    assert "Generated code (line" in text and "jnp.mean(" in text, text
    assert "compiler temporaries (estimated" in text, text
    # a name bound to the call's value says the same, with its own title
    named = await hover(client, uri, RMS_NORM, "mean_x_squared + eps")
    assert named.startswith("**`mean_x_squared`**") and "- f32[256] on the device" in named, named
    assert "Defined at line 19." in named and "mean_x_squared = jnp.mean(" in named, named
    # the assert's f-string message is never evaluated when compiling: the hover says so
    message = await hover(client, uri, RMS_NORM, "!= {n}", 4)
    assert "not evaluated when compiling" in message, message


async def test_register_block_size_says_the_block_where_it_comes_from_and_legal_values(client: LanguageClient):
    uri = await opened(client, "softmax_two_pass.py", SOFTMAX)
    text = await hover(client, uri, SOFTMAX, "hl.register_block_size(n)", 5)
    assert text.startswith("**`hl.register_block_size(n)`** — block size **"), text
    assert "`block_sizes[1]` of this config" in text, text
    assert "Tiles an extent of 1024 (`x`, `out`; an inner loop)" in text, text
    assert "Legal values: a multiple of 128 (it tiles a last, lane dim), up to the whole extent 1024" in text, text
    assert "Tuning tries 128, 256, 512, 1024" in text, text
    assert "From: a default" in text and "the decorator gives no config" in text, text
    used = await hover(client, uri, SOFTMAX, "block_size=block_size_m", 12)
    assert "`block_sizes[0]` of this config" in used and "a multiple of 8" in used, used

    given = SOFTMAX.replace("@helion.kernel()", "@helion.kernel(config=helion.Config(block_sizes=[64, 256]))")
    uri = await opened(client, "softmax_two_pass_given.py", given)
    text = await hover(client, uri, given, "hl.register_block_size(n)", 5)
    assert "block size **256**" in text and "From: the decorator's config." in text, text


async def test_a_block_read_only_for_its_shape_says_it_is_not_loaded(client: LanguageClient):
    uri = await opened(client, "welford_layer_norm.py", WELFORD)
    for offset in (0, len("x[tile_m, 0]")):  # on the tensor's name and on the whole subscript
        text = await hover(client, uri, WELFORD, "x[tile_m, 0]", offset)
        assert text.startswith("**`x[tile_m, 0]`** — not loaded: read only for its shape and dtype, f32[128]"), text
        assert "Stands for the block at `tile_m`'s block (128) × position 0 of `x`" in text, text
        assert "no BlockSpec, DMA or VMEM buffer" in text, text
    # the accumulator it shapes is a device value of that shape
    count = await hover(client, uri, WELFORD, "count = torch.zeros_like", 0)
    assert count.startswith("**`count`** — f32[") and "on the device" in count, count


BROKEN = '''import helion
import helion.language as hl
import torch


# helion: args(x=f32[64, 128])
@helion.kernel
def broken(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile, :] = x[tile, :] * scale
    return out
'''


async def test_a_token_of_a_kernel_that_does_not_compile_says_why(client: LanguageClient):
    uri = await opened(client, "broken.py", BROKEN)
    text = await hover(client, uri, BROKEN, "torch.empty_like(x)", 7)
    assert text.startswith("**`torch.empty_like`** — **Does not compile** (line 11): `HPL102`"), text
    assert "scale" in text, text
