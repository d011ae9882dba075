"""vLLM's kernel idioms compile and run right (kernels of our own, written the way vLLM's are):
`scale.zero_()` on an argument before the grid, `hl.atomic_max` into `scale[0]` of a one-element tensor,
`torch.empty_strided` outputs, `zero_()` / `fill_()` of a fresh allocation, and `helion._utils.cdiv`
under every name a file reaches it with. Each is checked against torch, and the scale kernel also through
`check` (interpret mode, after the deviceless libtpu compile where libtpu is installed)."""

import textwrap

import pytest
import torch

import compiler
from compiler.check import check_rows
from compiler.reference import run_reference
from compiler.support.diagnostics import CompileError

PER_TENSOR = '''
import torch
import helion
import helion.language as hl


# helion: args(result=f8e4m3[16, 1024], input=bf16[16, 1024], scale=f32[1])
@helion.kernel()
def per_tensor_quant(result: torch.Tensor, input: torch.Tensor, scale: torch.Tensor) -> None:
    m, n = input.shape
    hl.specialize(n)
    scale.zero_()
    for tm, tn in hl.tile([m, n]):
        peak = torch.amax(torch.amax(torch.abs(input[tm, tn]), dim=1)).to(torch.float32)
        hl.atomic_max(scale, [0], peak / 448.0)
    hl.barrier()
    for tm, tn in hl.tile([m, n]):
        result[tm, tn] = (input[tm, tn].to(torch.float32) / scale[0]).to(result.dtype)
'''

IDIOMS = '''
import torch
import helion
import helion._utils
import helion.language as hl
from helion import cdiv
from helion._utils import cdiv as ucdiv


# helion: args(x=f32[8, 256], group=128)
@helion.kernel()
def strided_scaled(x: torch.Tensor, group: int) -> torch.Tensor:
    m, n = x.shape
    groups = helion._utils.cdiv(n, group) + ucdiv(n + 1, group) - cdiv(n, group)
    out = torch.empty_strided((m, n), (1, m), dtype=torch.float32, device=x.device)
    for t in hl.tile([m, n]):
        out[t] = x[t] * groups
    return out


# helion: args(x=f32[16, 256])
@helion.kernel()
def filled(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    acc = torch.empty_like(x)
    acc.zero_()
    base = torch.empty_like(x)
    base.fill_(2.5)
    for t in hl.tile(x.size()):
        acc[t] += x[t]
        base[t] = base[t] * x[t]
    return acc, base


# helion: args(x=f32[8, 512], group=128)
@helion.kernel()
def group_amax(x: torch.Tensor, group: int) -> torch.Tensor:
    m, n = x.shape
    groups = n // group
    out = torch.empty([m, groups], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(m, block_size=2):
        m_blk = (tile_m.begin + hl.arange(tile_m.block_size))[:, None, None]
        for tile_g, tile_n in hl.tile([groups, group], block_size=[2, group]):
            n_blk = (tile_g.index[:, None] * group + tile_n.index[None, :])[None, :, :]
            blk = hl.load(x, [m_blk, n_blk])
            out[tile_m, tile_g] = torch.amax(blk, dim=-1)
    return out


# helion: args(x=f32[8, 128])
@helion.kernel()
def overlapping(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_strided((8, 128), (1, 1), dtype=torch.float32, device=x.device)
    for t in hl.tile(x.size()):
        out[t] = x[t]
    return out
'''


@pytest.fixture()
def idioms():
    return compiler.load(textwrap.dedent(IDIOMS))


def test_per_tensor_scale_zeroed_then_atomic_max_passes_check(tmp_path) -> None:
    path = tmp_path / "per_tensor.py"
    path.write_text(textwrap.dedent(PER_TENSOR))
    report = check_rows(str(path), "per_tensor_quant", "v5e", ["unroll"])
    (row,) = report.rows
    assert row.verdict == "ok", row


def test_zeroed_argument_is_given_back_even_when_nonzero_on_entry(tmp_path) -> None:
    ck = compiler.load(textwrap.dedent(PER_TENSOR)).kernels["per_tensor_quant"].compile(chip="v5e")
    x = torch.randn(16, 1024).to(torch.bfloat16)
    result = torch.empty(16, 1024, dtype=torch.float8_e4m3fn)
    scale = torch.full((1,), 1e6)  # a stale value: zero_() must drop it, or the max keeps it
    ck(result, x, scale)
    want = x.float().abs().max() / 448.0
    assert torch.allclose(scale, want.reshape(1))
    assert torch.equal(result.float(), (x.float() / want).to(torch.float8_e4m3fn).float())


def test_empty_strided_and_every_cdiv_name(idioms) -> None:
    x = torch.randn(8, 256)
    got = idioms.kernels["strided_scaled"].compile(chip="v5e")(x, 128)
    assert torch.equal(got, x * 3)  # cdiv(256, 128) + cdiv(257, 128) - cdiv(256, 128)


def test_zero_and_fill_of_a_fresh_allocation(idioms) -> None:
    x = torch.randn(16, 256)
    acc, base = idioms.kernels["filled"].compile(chip="v5e")(x)
    assert torch.equal(acc, x)
    assert torch.equal(base, 2.5 * x)


def test_overlapping_strides_are_one_diagnostic(idioms) -> None:
    with pytest.raises(CompileError) as info:
        idioms.kernels["overlapping"].compile(chip="v5e")
    (diag,) = info.value.diagnostics
    assert diag.code == "HPL105" and "overlap" in diag.message


def test_position_tensors_shaped_to_broadcast_index_jointly(idioms) -> None:
    """`hl.load(x, [m[:, None, None], n[None]])` reads x at the broadcast positions (torch's advanced indexing),
    in the compiled kernel and in the eager reference alike."""
    x = torch.randn(8, 512)
    want = x.reshape(8, 4, 128).amax(-1)
    ck = idioms.kernels["group_amax"].compile(chip="v5e")
    assert torch.equal(ck(x, 128), want)
    got = run_reference(textwrap.dedent(IDIOMS), "group_amax", [x, 128], list(ck.config["block_sizes"]))
    assert torch.equal(got, want)


FNUZ = '''
import torch
import helion
import helion.language as hl

_FNUZ = torch.float8_e5m2fnuz


# helion: args(x=f32[16, 256])
@helion.kernel()
def direct(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape, dtype=torch.float8_e4m3fnuz, device=x.device)
    for t in hl.tile(x.size()):
        out[t] = x[t].to(out.dtype)
    return out


# helion: args(x=f32[16, 256])
@helion.kernel()
def via_constant(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape, dtype=_FNUZ, device=x.device)
    for t in hl.tile(x.size()):
        out[t] = x[t].to(out.dtype)
    return out
'''


@pytest.mark.parametrize("chip", ["v4", "v5e", "v6e", "v7x"])
@pytest.mark.parametrize(("kernel", "dtype", "text"), [("direct", "float8_e4m3fnuz", "dtype=torch.float8_e4m3fnuz"),
                                                       ("via_constant", "float8_e5m2fnuz", "dtype=_FNUZ")])
def test_an_fp8_type_mosaic_cannot_hold_is_one_diagnostic_naming_chip_and_type(chip, kernel, dtype, text) -> None:
    line = next(i for i, t in enumerate(textwrap.dedent(FNUZ).splitlines()) if text in t)
    with pytest.raises(CompileError) as info:
        compiler.load(textwrap.dedent(FNUZ)).kernels[kernel].compile(chip=chip)
    (diag,) = info.value.diagnostics
    assert diag.code == "HPL108" and f"TPU {chip} cannot hold {dtype}" in diag.message
    assert diag.range.start.line == line


@pytest.mark.parametrize("chip", ["v4", "v5e", "v6e", "v7x"])
@pytest.mark.parametrize("dtype", ["f8e4m3", "f8e5m2"])
def test_fp8_storage_types_mosaic_holds_compile_on_every_chip(chip, dtype) -> None:
    source = textwrap.dedent(PER_TENSOR).replace("result=f8e4m3", f"result={dtype}")
    ck = compiler.load(source).kernels["per_tensor_quant"].compile(chip=chip)
    assert {"f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2"}[dtype] in ck.source


PAGED = '''
import torch
import helion
import helion.language as hl
from helion._utils import cdiv


# helion: args(table=f8e4m3[64, 128], pages=i32[16], lens=i32[16])
@helion.kernel()
def paged_rows(table: torch.Tensor, pages: torch.Tensor, lens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n = pages.size(0)
    rows = torch.empty([n, table.size(1)], dtype=torch.float32, device=table.device)
    chunks = torch.empty([n], dtype=torch.int32, device=table.device)
    for t in hl.tile(n):
        rows[t, :] = table[pages[t], :].to(torch.float32)
        chunks[t] = cdiv(lens[t], 4)
    return rows, chunks
'''


def test_fp8_rows_gathered_and_cdiv_of_a_loaded_length(tmp_path) -> None:
    """vLLM's MLA decode reads fp8 pages at loaded positions (a one-hot gather: fp8 is widened to bfloat16, which
    holds every fp8 value, as the MXU of a v5e takes no fp8) and splits a loaded length with helion._utils.cdiv."""
    path = tmp_path / "paged.py"
    path.write_text(textwrap.dedent(PAGED))
    ck = compiler.load(str(path)).kernels["paged_rows"].compile(chip="v5e")
    table = torch.randn(64, 128).to(torch.float8_e4m3fn)
    pages = torch.randint(0, 64, (16,), dtype=torch.int32)
    lens = torch.randint(0, 100, (16,), dtype=torch.int32)
    rows, chunks = ck(table, pages, lens)
    assert torch.equal(rows, table[pages.long()].float())
    assert torch.equal(chunks, (lens + 3) // 4)
    (row,) = check_rows(str(path), "paged_rows", "v5e", ["unroll"]).rows
    assert row.verdict == "ok", row


NORM_ROPE = '''
import torch
import helion
import helion.language as hl


# helion: args(qk=bf16[4, 24, 128], q_weight=bf16[128], k_weight=bf16[128], cache=bf16[64, 128], pos=i32[4], num_q=16)
@helion.kernel()
def norm_rope(qk: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, cache: torch.Tensor,
              pos: torch.Tensor, num_q: int) -> None:
    tokens, heads, dim = qk.shape
    hl.specialize(heads)
    hl.specialize(dim)
    half = dim // 2
    for tm, th, tn in hl.tile([tokens, heads, dim], block_size=[1, None, dim]):
        use_q = (th.index < num_q)[None, :, None]
        w = torch.where(use_q, q_weight[None, None, tn], k_weight[None, None, tn])
        qk[tm, th, tn] = qk[tm, th, tn] * w
        p = pos[tm]
        cos = cache[p, hl.arange(half)]
        sin = cache[p, hl.arange(half) + half]
        x1 = qk[tm, th, hl.arange(half)]
        x2 = qk[tm, th, hl.arange(half) + half]
        qk[tm, th, hl.arange(half)] = x1 * cos[:, None, :] - x2 * sin[:, None, :]
        qk[tm, th, hl.arange(half) + half] = x2 * cos[:, None, :] + x1 * sin[:, None, :]
'''


def test_norm_rope_with_a_3d_head_mask_and_a_position_row_of_the_cache(tmp_path) -> None:
    """vLLM's fused QK norm + RoPE: a [1, heads, 1] mask choosing the weight of bfloat16 values (Mosaic could not
    relayout its broadcast: it is taken as int32 and the select done in float32) and `cache[pos, hl.arange(d)]`,
    one row per position tensor entry (each 1-d position tensor adds its own dim, in the reference as well)."""
    path = tmp_path / "norm_rope.py"
    path.write_text(textwrap.dedent(NORM_ROPE))
    ck = compiler.load(str(path)).kernels["norm_rope"].compile(chip="v5e")
    qk = torch.randn(4, 24, 128).bfloat16()
    qw, kw, cache = torch.randn(128).bfloat16(), torch.randn(128).bfloat16(), torch.randn(64, 128).bfloat16()
    pos = torch.tensor([3, 0, 63, 7], dtype=torch.int32)
    want = qk * torch.where((torch.arange(24) < 16)[None, :, None], qw, kw)
    cos, sin = cache[pos.long(), :64][:, None, :], cache[pos.long(), 64:][:, None, :]
    x1, x2 = want[..., :64].clone(), want[..., 64:].clone()
    want[..., :64], want[..., 64:] = x1 * cos - x2 * sin, x2 * cos + x1 * sin
    got = qk.clone()
    ck(got, qw, kw, cache, pos, 16)
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)
    (row,) = check_rows(str(path), "norm_rope", "v5e", ["unroll"]).rows
    assert row.verdict == "ok", row
