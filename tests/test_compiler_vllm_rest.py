"""vLLM-style kernels that failed after a clean compile (issue 40, item 4): what the TPU compiler rejected in
vLLM's op files, on kernels of our own written in their style (tests/kernels/vllm_style/)."""

from pathlib import Path

import pytest
import torch
from test_checks_libtpu import libtpu

import compiler
from compiler.check import check_rows
from compiler.support.diagnostics import CompileError

KERNELS = Path(__file__).resolve().parent / "kernels" / "vllm_style"
ROW_QUANT = KERNELS / "row_quant_fp8.py"
PIPELINE = {"block_sizes": [512, 512], "pallas_loop_type": "emit_pipeline"}


def _one_token_source() -> str:
    module = compiler.load(str(ROW_QUANT))
    module.cases = "tokens=1, width=1024"
    return module.kernels["row_quant_fp8"].compile(config=PIPELINE, chip="v5e", shape_set=0).source


def test_a_one_row_output_written_by_a_one_step_loop_is_written_at_block_0() -> None:
    """num_tokens=1: the grid loop has one step, so its only row is 0; a constant the TPU compiler needs no proof
    for (a program id made it reject the float8 store: "index at dimension 0 is divisible by the tile dimension
    4")."""
    src = _one_token_source()
    assert "out_specs=[pl.BlockSpec((1, 512), lambda tile_n: (0, tile_n))]," in src
    assert "lambda tile_n: (tile_m, tile_n)" not in src


@libtpu
def test_one_token_fp8_quant_under_emit_pipeline_passes_the_tpu_compile_and_matches() -> None:
    report = check_rows(str(ROW_QUANT), "row_quant_fp8", "v5e", ["emit_pipeline"], cases="tokens=1, width=1024")
    rows = [r for r in report.rows if "tokens=1, width=1024" in r.kernel]
    assert len(rows) == 1 and rows[0].verdict == "ok", report.rows


def test_cases_of_one_tensor_without_a_tuple_are_shape_sets_and_finfo_is_known() -> None:
    """`inputs[key] = input_tensor` (vLLM's silu_mul_block_quant_fp8): each case is the kernel's one argument;
    `torch.finfo(torch.float8_e4m3fn).max` in the kernel's host code is 448 (it was `bool` has no attribute)."""
    module = compiler.load(str(KERNELS / "block_quant_one_arg.py"))
    kernel = module.kernels["block_quant_one_arg"]
    labels = [o.case_label for o in kernel.shape_set_origins]
    assert labels and all(label.startswith("width_") for label in labels), labels
    ck = kernel.compile(chip="v5e", shape_set=0)
    assert "448" in ck.source or "0.002232142857142857" in ck.source
    x = torch.randn(8, 512).bfloat16()
    out, scales = ck(x)
    y = x[:, :256].float() * x[:, 256:].float()
    want = (y.abs().amax(dim=-1) / 448.0).clamp(min=1 / (448.0 * 512.0))
    torch.testing.assert_close(scales.reshape(-1), want)
    torch.testing.assert_close(out.float(), (y / want[:, None]).to(torch.float8_e4m3fn).float())


MAX_OF_A_NUMBER = '''
import torch
import helion
import helion.language as hl


# helion: args(x=f32[16, 256])
@helion.kernel()
def floor_max(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.shape[0]):
        out[t, :] = torch.max(x[t, :], 1e-6)
    return out
'''


def test_torch_max_of_a_number_is_one_diagnostic_naming_the_dim_argument() -> None:
    with pytest.raises(CompileError) as err:
        compiler.load(MAX_OF_A_NUMBER).kernels["floor_max"].compile(chip="v5e")
    (d,) = err.value.diagnostics
    assert d.code == "HPL106" and "not a number to compare with" in d.message and d.range.start.line == 11


GATED_ROW = '''
import torch
import helion
import helion.language as hl


# helion: args(out=bf16[4, 256], x=bf16[4, 512])
@helion.kernel()
def gated_row(out: torch.Tensor, x: torch.Tensor) -> None:
    m, two_w = x.shape
    w = hl.specialize(two_w) // 2
    for tile_m in hl.tile(m, block_size=1):
        for tile_n in hl.tile(w):
            a = x[tile_m, tile_n].to(torch.float32)
            b = hl.load(x, [tile_m, tile_n.index + w],
                        extra_mask=((tile_n.index + w) < two_w)[None, :]).to(torch.float32)
            out[tile_m, tile_n] = (a * torch.sigmoid(a) * b).to(out.dtype)
'''


def test_a_masked_load_of_one_bfloat16_row_selects_in_float32(tmp_path) -> None:
    """vLLM's silu_and_mul + per-token quant reads the gate half under an extra_mask, one row per grid step: a
    select of one row of bfloat16 values was "Not implemented: Sublane broadcast" on v5e; now done in float32."""
    ck = compiler.load(GATED_ROW).kernels["gated_row"].compile(chip="v5e", config={"pallas_loop_type": "unroll"})
    (line,) = [ln for ln in ck.source.splitlines() if "jnp.where(" in ln]
    assert ".astype(jnp.float32), " in line and line.count(".astype(jnp.bfloat16)") >= 1, line
    x = torch.randn(4, 512).bfloat16()
    out = torch.empty(4, 256).bfloat16()
    ck(out, x)  # `out` is given back updated, as torch would see it
    got = out
    a, b = x[:, :256].float(), x[:, 256:].float()
    torch.testing.assert_close(got.float(), (a * torch.sigmoid(a) * b).bfloat16().float(), rtol=1e-2, atol=1e-2)


@libtpu
def test_a_masked_load_of_one_bfloat16_row_passes_the_tpu_compile(tmp_path) -> None:
    path = tmp_path / "gated_row.py"
    path.write_text(GATED_ROW)
    (row,) = check_rows(str(path), "gated_row", "v5e", ["unroll"]).rows
    assert row.verdict == "ok", row


HOST_WHOLE = '''
import torch
import helion
import helion.language as hl


# helion: args(x=f32[16, 256], w=f32[256])
@helion.kernel()
def host_whole(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.shape[0]):
        out[t, :] = x[t, :] * w.to(torch.float32)
    return out
'''


def test_a_host_tensor_used_whole_in_the_loop_is_named_as_such() -> None:
    with pytest.raises(CompileError) as err:
        compiler.load(HOST_WHOLE).kernels["host_whole"].compile(chip="v5e")
    (d,) = err.value.diagnostics
    assert d.code == "HPL101" and "used whole inside a device loop" in d.message and d.range.start.line == 11


FP4_CASES = '''
from typing import Any

import torch
import helion.language as hl
from vllm.kernels.helion.case_key import CaseKey
from vllm.kernels.helion.register import register_kernel


def cases() -> dict[CaseKey, tuple[Any, ...]]:
    w = torch.randint(0, 256, (64, 32), dtype=torch.uint8, device="cuda").view(torch.float4_e2m1fn_x2)
    return {CaseKey({"m": 64}): (w,)}


@register_kernel(input_generator=cases)
def fp4_rows(w: torch.Tensor) -> torch.Tensor:
    out = torch.empty(w.shape, dtype=torch.float32, device=w.device)
    for t in hl.tile(w.shape[0]):
        out[t, :] = w[t, :].to(torch.float32)
    return out
'''


def test_a_generator_without_a_usable_case_is_reported_on_the_kernel_def_line() -> None:
    module = compiler.load(FP4_CASES)
    assert not [d for d in module.diagnostics if d.code == "HPL112"]  # said once, as the kernel's (test_compiler_vllm_mla)
    d = module.kernels["fp4_rows"].shape_hint
    assert d is not None and d.range.start.line == 15 and d.range.start.character == 0, d
