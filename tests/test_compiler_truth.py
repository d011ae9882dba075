"""TPU truth without a TPU: the seed's VMEM verdicts, padding arithmetic, lowering and libtpu failures
mapped to the right kernel line."""

import pytest
import torch
from conftest import EXAMPLES

import compiler
from compiler.codegen.work import padded_bytes
from compiler.tpu.libtpu_compile import libtpu_available
from compiler.vmem.report import MiB

ATTN = EXAMPLES / "attention.py"
SRC_LINES = ATTN.read_text().splitlines()


def attention(shape_set, **config):
    return compiler.load(ATTN).kernels["attention"].compile(shape_set=shape_set, config=config, chip="v7x")


def line_of(fragment: str) -> int:
    return next(i for i, t in enumerate(SRC_LINES) if fragment in t)


@pytest.mark.parametrize("shape,dtype,expected", [
    ((8, 128), torch.float32, 8 * 128 * 4),
    ((1, 128), torch.float32, 8 * 128 * 4),  # one row still takes a whole (8, 128) tile
    ((1, 128), torch.bfloat16, 16 * 128 * 2),  # bf16 packs 16 rows per tile
    ((3, 200), torch.int8, 32 * 256),  # int8 packs 32 rows; lanes round up to 256
    ((2, 16, 130), torch.bfloat16, 2 * 16 * 256 * 2),
    ((100,), torch.float32, 8 * 128 * 4),
    ((None, 512), torch.float32, 8 * 512 * 4),  # squeezed dims take no space
])
def test_padding(shape, dtype, expected):
    assert padded_bytes(shape, dtype) == expected


def test_rows_describe_each_buffer():
    ck = attention(0, block_sizes=[1, 512, 512], pallas_loop_type="unroll")
    rows = {r.name: r for r in ck.vmem.rows}
    k = rows["k_flat"]
    assert k.role == "whole-array resident operand" and k.block_shape == (1, 8192, 256)
    assert k.dtype == "bfloat16" and k.buffer_count == 2 and k.bytes == 2 * 8192 * 256 * 2
    assert rows["q_flat"].role == "input block" and rows["q_flat"].block_shape == (1, 512, 256)
    assert rows["out"].role == "output block"
    assert any(r.role == "compiler temporaries (estimated)" for r in ck.vmem.rows)
    assert ck.vmem.total_bytes == sum(r.bytes for r in ck.vmem.rows)


def test_seed_unroll_fits_at_8k_and_not_at_32k():
    short = attention(0, block_sizes=[1, 512, 512], pallas_loop_type="unroll")
    long = attention(1, block_sizes=[1, 512, 512], pallas_loop_type="unroll")
    assert short.vmem.verdict == "fits"
    assert long.vmem.verdict == "out_of_vmem" and long.vmem.total_bytes > 64 * MiB
    oom = [d for d in long.diagnostics if d.code == "HPL300"]
    assert oom and oom[0].range.start.line == line_of("for tile_bh, tile_q in hl.tile")
    assert "emit_pipeline" in oom[0].message


def test_emit_pipeline_vmem_is_independent_of_length():
    short = attention(0, block_sizes=[1, 512, 512], pallas_loop_type="emit_pipeline")
    long = attention(1, block_sizes=[1, 512, 512], pallas_loop_type="emit_pipeline")
    assert short.vmem.verdict == long.vmem.verdict == "fits"
    assert short.vmem.total_bytes == long.vmem.total_bytes
    roles = {r.role for r in long.vmem.rows}
    assert "inner-pipeline buffer" in roles and "scratch / carried value" in roles


def test_single_buffered_resident_kv_fits_at_32k():
    config = {"block_sizes": [1, 256, 512], "pallas_loop_type": "unroll"}
    assert attention(1, **config).vmem.verdict == "out_of_vmem"
    ck = attention(1, **config, pallas_load_buffer_count=[2, 1, 1])
    assert ck.vmem.verdict != "out_of_vmem"


def test_generated_limit_follows_report():
    ck = attention(0, block_sizes=[1, 1024, 1024], pallas_loop_type="unroll")
    assert ck.vmem.verdict == "over_default_limit"
    limit = ck.plan.calls[0].vmem_limit_bytes
    assert ck.vmem.total_bytes < limit <= ck.chip.max_vmem_limit_bytes
    assert f"vmem_limit_bytes={limit}" in ck.source
    assert any(d.code == "HPL301" for d in ck.diagnostics)


def _attention_v5e(**config):
    return compiler.load(ATTN).kernels["attention"].compile(shape_set=0, config=config, chip="v5e")


def test_a_fori_loop_carry_counts_as_what_libtpu_keeps():
    """The accumulator and row statistics a fori_loop carries are held twice (in and out), statistics as columns:
    libtpu 0.0.42.1 for v5e needs 87.1 MiB for [1, 8192, 512] and 59.7 for [1, 4096, 1024] (the report said 52.8
    and 44.8 without them; bench/vmem_calibration.py v5e)."""
    for blocks, libtpu in (([1, 8192, 512], 87.1), ([1, 4096, 1024], 59.7)):
        total = _attention_v5e(block_sizes=blocks, pallas_loop_type="fori_loop").vmem.total_bytes / MiB
        assert 0.9 * libtpu <= total <= 1.1 * libtpu, (blocks, total)


def test_the_generated_code_asks_for_what_libtpu_needs():
    """[1, 1024, 1024] unroll: 54.0 MiB to libtpu for v5e, which it was refused at the 51 MiB the code once asked
    for. The report said 41.2 before it counted every unrolled iteration on v5e (docs/vmem-calibration.md); it says
    54.0 now, and the code asks for half again as much."""
    ck = _attention_v5e(block_sizes=[1, 1024, 1024], pallas_loop_type="unroll")
    assert 0.9 * 54.0 <= ck.vmem.total_bytes / MiB <= 1.15 * 54.0
    assert 54.0 <= ck.plan.calls[0].vmem_limit_bytes / MiB


def test_json_shape():
    ck = attention(0, block_sizes=[1, 512, 512], pallas_loop_type="unroll")
    data = ck.to_json()["vmem"]
    assert set(data) >= {"total_bytes", "limit_bytes", "capacity_bytes", "verdict", "buffers"}
    assert set(data["buffers"][0]) >= {"name", "role", "block_shape", "dtype", "buffer_count", "bytes"}


def test_lowering_failure_lands_on_the_load():
    # three buffers are legal inside emit_pipeline but not for a top-level BlockSpec: Mosaic rejects it
    ck = attention(0, block_sizes=[1, 512, 512], pallas_loop_type="unroll", pallas_load_buffer_count=[3, 2, 2])
    diags = ck.check_lowering()
    assert len(diags) == 1 and diags[0].code == "HPL400"
    assert "buffer" in diags[0].message
    assert diags[0].range.start.line == line_of("q_blk = q_flat[")


def test_lowering_passes_for_the_seed_configs():
    for shape_set in (0, 1):
        assert attention(shape_set, block_sizes=[1, 512, 512], pallas_loop_type="emit_pipeline").check_lowering() == []


@pytest.mark.libtpu
@pytest.mark.skipif(not libtpu_available(), reason="libtpu is not installed")
def test_real_compile_reports_vmem_oom_on_the_grid_loop():
    # lowering cannot see VMEM; the real compiler runs out (4096 query rows against 2048 keys a step: 74.7 MiB
    # to libtpu, over v7x's 64; the VMEM report says so too, 81.6 MiB, but only libtpu's word is the chip's)
    ck = attention(0, block_sizes=[1, 4096, 2048], pallas_loop_type="fori_loop")
    assert ck.check_lowering() == []
    diags = ck.check_tpu_compile()
    assert len(diags) == 1 and diags[0].code == "HPL302"
    assert diags[0].range.start.line == line_of("for tile_bh, tile_q in hl.tile")
    assert "VMEM" in diags[0].message


@pytest.mark.libtpu
@pytest.mark.skipif(not libtpu_available(), reason="libtpu is not installed")
def test_real_compile_reports_facts():
    ck = attention(0, block_sizes=[1, 512, 512], pallas_loop_type="emit_pipeline")
    assert ck.check_tpu_compile() == []
    facts = ck.truth["libtpu"].facts
    assert facts["op_counts"]["matmul"] > 0 and facts["op_counts"]["transcendental"] > 0
    assert 0 < facts["vmem_used_bytes"] <= facts["vmem_limit_bytes"]
