"""vLLM-style kernels that failed after a clean compile (issue 40, item 4): what the TPU compiler rejected in
vLLM's op files, on kernels of our own written in their style (tests/kernels/vllm_style/)."""

from pathlib import Path

from test_checks_libtpu import libtpu

import compiler
from compiler.check import check_rows

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
