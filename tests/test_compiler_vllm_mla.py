"""vLLM's MLA decode and nvfp4 op files on a TPU (issue 40): what their kernels, as written, got wrong in this
tool, on kernels of our own written in vLLM's style (tests/kernels/vllm_style/)."""

from pathlib import Path

import pytest
from test_checks_libtpu import libtpu

import compiler
from compiler.support.diagnostics import CompileError

KERNELS = Path(__file__).resolve().parent / "kernels" / "vllm_style"


def test_a_generator_of_packed_fp4_tensors_gives_one_error_on_the_kernel_naming_the_type() -> None:
    """vLLM's nvfp4 kernels: every case passes `torch.float4_e2m1fn_x2` tensors (made on `DEVICE = "cuda" if
    torch.cuda.is_available() else "cpu"`). One diagnostic, on the `def` line, naming the type: before, a warning
    that the argument was "not known without running the file" and an HPL107 hint that "nothing in this file
    calls it"."""
    module = compiler.load(str(KERNELS / "fp4_dot.py"))
    kernel = module.kernels["fp4_row_sums"]
    assert not kernel.shape_sets
    assert not [d for d in module.diagnostics if d.code in ("HPL107", "HPL112")], module.diagnostics
    with pytest.raises(CompileError) as raised:
        kernel.compile(chip="v5e")
    (d,) = raised.value.diagnostics
    assert d.code == "HPL203" and d.severity.name == "ERROR"
    assert (d.range.start.line, d.range.start.character) == (23, 0)  # `def fp4_row_sums(`
    assert "`packed` as torch.float4_e2m1fn_x2" in d.message and "no fp4 storage type" in d.message


PAGED = KERNELS / "paged_decode.py"


def test_a_gather_from_a_big_block_names_its_table_copies_in_the_vmem_report() -> None:
    """vLLM's mla_decode_kv_split gathers rows of 512 and 64 from a 2048-row fp8 cache by a page table: the one-hot
    gather copies the whole cache block several times over (libtpu for v5e: 73.7 MiB, the report said 6.1 and asked
    for 16, so libtpu refused it with HPL302). The report now holds those copies, named on each gather."""
    kernel = compiler.load(str(PAGED)).kernels["paged_decode"]
    report = kernel.compile(chip="v5e", shape_set=0).vmem
    tables = [r for r in report.rows if r.role == "gather table copies (estimated)"]
    assert [r.name for r in tables] == ["kv", "kv"], report.table()
    assert [r.range.start.line + 1 for r in tables] == [79, 80]  # the two hl.load(kv, [at, 0, ...]) lines
    # 64 rows of 512 and of 64 (lanes padded to 128) as f32, 14 times over
    assert sum(r.bytes for r in tables) == 14 * 64 * (512 + 128) * 4
    assert report.limit_bytes >= 1.5 * report.total_bytes


def test_check_draws_integer_inputs_the_way_the_input_generator_makes_them() -> None:
    """The page table holds page numbers (`torch.arange(pages)`) and the lengths are the pages' tokens
    (`torch.full(..., seq_len)`): drawn as small random integers (-8..8, lengths 1..8) they index outside the cache,
    and the file's own reference raised IndexError (vLLM's MLA decode gave a 40 % mismatch). Now they are drawn
    within what the generator puts there, at the case's own shapes."""
    from compiler.check import _generator_ranges
    from compiler.reference import make_inputs

    kernel = compiler.load(str(PAGED)).kernels["paged_decode"]
    ranges = _generator_ranges(kernel, 0)
    assert ranges == {"lens": (64, 64), "table": (0, 3)}
    ck = kernel.compile(chip="v5e", shape_set=0)
    values = dict(zip(ck.args, make_inputs(dict(ck.args), tables=ck.tables, ranges=ranges), strict=True))
    assert values["lens"].eq(64).all() and values["table"].min() >= 0 and values["table"].max() <= 3


@libtpu
def test_paged_decode_passes_the_check_with_the_generators_inputs() -> None:
    from compiler.check import check_rows

    report = check_rows(str(PAGED), "paged_decode", "v5e", ["unroll"])
    assert [r.verdict for r in report.rows] == ["ok"], report.rows
    assert not [n for n in report.notes if "disagree" in n or "failed" in n], report.notes


def test_a_grid_too_large_for_tpu_interpret_mode_gets_a_verdict_from_the_hlo_interpreter() -> None:
    """vLLM's mla_decode_softmax_reduce was NOT RUN (8,192 grid steps and splits: minutes in TPU interpret mode). Its
    work is small, so it runs in Pallas's HLO interpreter, the row saying so and what that mode does not look for."""
    from compiler.check import check_rows

    report = check_rows(str(KERNELS / "split_reduce.py"), "split_reduce", "v5e", ["unroll"])
    (row,) = report.rows
    assert row.verdict in ("ok", "unverified"), row  # unverified: libtpu not installed (CI)
    assert "ok (run in Pallas's HLO interpreter, not TPU interpret mode" in row.eager and "4224 grid steps" in row.eager
    assert row.mine == "ok", row  # against its own autotune_baseline_fn too


def test_at_mla_decode_size_the_gather_copies_not_the_resident_cache_push_it_over_the_default_limit() -> None:
    """At vLLM's 2,048 cache rows the gathers' copies (70 MiB) push the kernel over v5e's 16 MiB default: the code
    asks for more (HPL301), and the 2.5 MiB resident cache is not blamed for it (HPL501 said it was)."""
    kernel = compiler.load(str(PAGED)).kernels["paged_decode"]
    ck = kernel.compile(chip="v5e", args="q=bf16[2, 8, 576], cache=f8e4m3[128, 16, 1, 576], out=f32[2, 8, 4, 513], "
                                         "lens=i32[2], table=i64[2, 128], group=4, splits=4, page=16, latent=512, "
                                         "rope=64")
    codes = [d.code for d in ck.diagnostics]
    assert "HPL301" in codes and "HPL501" not in codes, ck.diagnostics
    assert ck.vmem.limit_bytes >= 1.5 * ck.vmem.total_bytes > 100 * 2**20
