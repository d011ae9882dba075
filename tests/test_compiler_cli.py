"""`helion-pallas compile` and `check` as a user runs them: output formats and exit codes."""

import json
import subprocess
import sys

import pytest
import torch
from conftest import EXAMPLES, REPO
from test_checks_libtpu import libtpu

import compiler


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compiler.cli", *args], capture_output=True, text=True, timeout=600)


def test_emit_json_has_vmem_and_diagnostics():
    res = run("compile", str(EXAMPLES / "attention.py"), "-k", "attention", "--shape-set", "1",
              "--config", '{"block_sizes": [1, 512, 512], "pallas_loop_type": "unroll"}', "--emit", "json")
    assert res.returncode == 1  # out of VMEM is an error diagnostic
    data = json.loads(res.stdout)
    assert data["vmem"]["verdict"] == "out_of_vmem"
    assert {"total_bytes", "limit_bytes", "capacity_bytes", "buffers"} <= set(data["vmem"])
    oom = [d for d in data["diagnostics"] if d["code"] == "HPL300"]
    assert oom and oom[0]["severity"] == "error" and set(oom[0]["range"]) == {"start", "end"}
    assert data["source"].startswith('"""Pallas TPU kernel') and data["source_map"]


def test_emit_pallas_and_vmem_with_args_and_printed_config():
    cfg = "helion.Config(block_sizes=[1, 256, 256], pallas_loop_type='emit_pipeline')"
    args = "q=f32[1, 2, 256, 128], k=f32[1, 2, 512, 128], v=f32[1, 2, 512, 128]"
    res = run("compile", str(EXAMPLES / "attention.py"), "--args", args, "--config", cfg)
    assert res.returncode == 0 and "pltpu.emit_pipeline(" in res.stdout
    res = run("compile", str(EXAMPLES / "attention.py"), "--args", args, "--config", cfg, "--emit", "vmem")
    assert res.returncode == 0 and "inner-pipeline buffer" in res.stdout and "-> fits" in res.stdout


def test_emit_mosaic():
    res = run("compile", str(EXAMPLES / "add.py"), "--args", "x=f32[64, 256], y=f32[64, 256]", "--emit", "mosaic")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "func.func" in res.stdout or "tpu." in res.stdout


@pytest.mark.parametrize("args,code", [
    (["compile", "no/such/file.py"], 2),
    (["compile", str(EXAMPLES / "add.py"), "--config", "{not json"], 2),
    (["compile", str(EXAMPLES / "add.py"), "--args", "x=f32[8, 128]"], 1),
    (["compile", str(EXAMPLES / "add.py"), "--shape-set", "7"], 1),
    (["compile", str(EXAMPLES / "add.py"), "-k", "nope"], 2),
])
def test_exit_codes(args, code):
    res = run(*args)
    assert res.returncode == code, (res.stdout, res.stderr)
    if code == 1:
        assert "error HPL" in res.stderr


def test_check_prints_a_table(tmp_path):
    res = run("check", str(EXAMPLES / "softmax.py"))
    assert res.returncode == 0, res.stdout + res.stderr
    header, row = res.stdout.splitlines()[:2]
    assert header.split() == ["kernel", "loop", "type", "config", "vs", "eager", "vs", "reference()", "seconds"]
    assert row.split()[0] == "softmax" and row.split()[-3:-1] == ["ok", "ok"]
    assert "1 passed, 0 failed" in res.stdout


IN_PLACE = """
import helion
import helion.language as hl
import torch


@helion.kernel(static_shapes=True)
def bump(x: torch.Tensor, y: torch.Tensor) -> None:
    for t in hl.tile(x.size()):
        x[t] = x[t] + y[t]


def reference(x, y):
    x {op}= y


SMALL = {{"x": "f32[16, 128]", "y": "f32[16, 128]"}}
"""


def _check(path, capsys, loop_types=("unroll",)):
    from compiler.check import check_file

    code = check_file(str(path), None, "v7x", list(loop_types))
    return code, capsys.readouterr().out


def test_check_runs_the_files_reference_and_reports_disagreement(tmp_path, capsys):
    bad = tmp_path / "bad_reference.py"
    bad.write_text((EXAMPLES / "add.py").read_text().replace("return x + y", "return x - y"))
    code, out = _check(bad, capsys)
    assert code == 1
    row = next(line for line in out.splitlines() if line.startswith("add "))
    assert " ok " in row and "MISMATCH" in row.split(" ok ", 1)[1]  # right vs eager, wrong vs reference()
    assert "add: the eager reference and reference() disagree" in out
    assert out.strip().splitlines()[-1] == "0 passed, 2 failed"


def test_check_compares_in_place_kernels_with_the_files_reference(tmp_path, capsys):
    good = tmp_path / "in_place.py"
    good.write_text(IN_PLACE.format(op="+"))
    code, out = _check(good, capsys)
    assert code == 0, out
    assert out.splitlines()[1].split()[-3:-1] == ["ok", "ok"]
    wrong = tmp_path / "in_place_wrong.py"
    wrong.write_text(IN_PLACE.format(op="-"))
    code, out = _check(wrong, capsys)
    assert code == 1 and "disagree" in out and "MISMATCH" in out.splitlines()[1]


def test_check_reports_a_failing_reference(tmp_path, capsys):
    broken = tmp_path / "broken_reference.py"
    broken.write_text((EXAMPLES / "add.py").read_text().replace("return x + y", "return x @ y"))
    code, out = _check(broken, capsys)
    assert code == 1
    assert out.splitlines()[1].split()[-3:-1] == ["ok", "-"]
    assert "add: reference() failed: RuntimeError" in out and out.strip().endswith("1 passed, 1 failed")


NOT_ASSOCIATIVE = """
import helion
import helion.language as hl
import torch


def minus(a, b):
    return a - b


# helion: args(x=f32[16, 128])
@helion.kernel(config=helion.Config(block_sizes=[16]))
def differences(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t, :] = hl.associative_scan(minus, x[t, :], 1)
    return out
"""


@pytest.mark.parametrize("call", ["hl.associative_scan(minus, x[t, :], 1)",
                                  "hl.reduce(minus, x[t, :], 1, keep_dims=True).expand_as(x[t, :])"])
def test_check_says_a_scan_mismatch_may_be_the_combine_function(tmp_path, capsys, call):
    """`a - b` is not associative: the compiled scan's (or reduction's) tree and the eager reading's sequence
    differ, and the row says that this, not the compiler, may be why."""
    path = tmp_path / "not_associative.py"
    path.write_text(NOT_ASSOCIATIVE.replace("hl.associative_scan(minus, x[t, :], 1)", call))
    code, out = _check(path, capsys)
    assert code == 1 and "MISMATCH" in out
    assert "they agree only where the combine function is associative on these inputs" in out


def test_check_without_a_reference(tmp_path, capsys):
    plain = tmp_path / "no_reference.py"
    plain.write_text((EXAMPLES / "add.py").read_text().replace("def reference(", "def other("))
    code, out = _check(plain, capsys)
    assert code == 0 and out.splitlines()[1].split()[-3:-1] == ["ok", "-"]


NAN_KERNEL = """
import helion
import helion.language as hl
import torch


@helion.kernel(static_shapes=True)
def zero_over_zero(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        t = x[tile, :] - {rhs}
        out[tile, :] = t / t * w[tile, :]
    return out


def reference(x, w):
    t = x - {ref_rhs}
    return t / t * w


SMALL = {{"x": "f32[16, 128]", "w": "f32[16, 128]"}}
"""


def test_check_takes_nan_in_both_as_agreement_and_all_nan_as_no_signal(tmp_path, capsys):
    """0 / 0 is NaN: where both sides are NaN they agree (as assert_close(equal_nan=True)) and the row says
    so; a run whose whole output is NaN compared nothing and is reported as such, neither MISMATCH nor a pass."""
    from compiler.check import compare

    some = tmp_path / "some_nan.py"  # t = 0 where x >= 0: NaN there, w elsewhere
    some.write_text(NAN_KERNEL.format(rhs="x[tile, :].abs()", ref_rhs="x.abs()"))
    code, out = _check(some, capsys)
    assert code == 0, out
    row = out.splitlines()[1]
    assert "ok (NaN in both at " in row and " of 2048)" in row and out.strip().endswith("1 passed, 0 failed")
    everywhere = tmp_path / "all_nan.py"
    everywhere.write_text(NAN_KERNEL.format(rhs="x[tile, :]", ref_rhs="x"))
    code, out = _check(everywhere, capsys)
    assert code == 1 and "NO SIGNAL: every output is NaN in both runs" in out and "MISMATCH" not in out, out
    from compiler.tune.correctness import check_compiled  # the tuner's gate: such a config is not verified

    kernel = compiler.load(everywhere.read_text(), str(everywhere)).kernels["zero_over_zero"]
    gate = check_compiled(kernel.compile(args={"x": "f32[16, 128]", "w": "f32[16, 128]"}))
    assert gate.verdict == "unverified" and "every output is NaN" in gate.message, gate
    nan = torch.tensor([1.0, float("nan")])
    assert compare(nan, nan.clone()) is None
    assert compare(nan, torch.tensor([1.0, 2.0])) is not None and compare(torch.tensor([1.0, 2.0]), nan) is not None


def test_check_reports_compile_errors(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text((EXAMPLES / "add.py").read_text().replace("x[block] + y[block]", "x[block] + z[block]"))
    res = run("check", str(bad))
    assert res.returncode == 1 and "compile error: HPL102" in res.stdout and "0 passed, 1 failed" in res.stdout


def test_call_with_wrong_shapes_is_a_clear_error():
    ck = compiler.load(EXAMPLES / "add.py").kernels["add"].compile(args="x=f32[64, 256], y=f32[64, 256]")
    with pytest.raises(ValueError, match=r"compiled for f32\[64, 256\], called with f32\[64, 128\]"):
        ck(torch.zeros(64, 256), torch.zeros(64, 128))
    with pytest.raises(TypeError, match="missing argument 'y'"):
        ck(torch.zeros(64, 256))


def test_check_judges_half_precision_against_the_outputs_magnitude():
    """A bf16 element that is a difference of large terms carries their rounding: one bf16 ulp of the output's
    largest magnitude (4 at 652) is no mismatch, wherever it lands; an error of 5% of that magnitude is."""
    from compiler.check import compare

    expected = torch.tensor([652.0, -300.0, 0.5, 0.0]).to(torch.bfloat16)
    assert compare(torch.tensor([652.0, -300.0, 4.5, -4.0]).to(torch.bfloat16), expected) is None
    problem = compare(torch.tensor([652.0, -300.0, 33.0, 0.0]).to(torch.bfloat16), expected)
    assert problem is not None and problem.startswith("output 0: Mismatched elements: 1 / 4")
    assert "allowed 6.52 + 0.03·|expected|" in problem
    small = torch.tensor([1.0, 0.5, 0.25])  # f32 at magnitude ~1 keeps its absolute bound of 2e-4
    assert compare(small + 1e-4, small) is None and compare(small + 1e-3, small) is not None


def test_check_runs_a_large_shape_set_at_reduced_shapes_and_says_so(tmp_path, capsys):
    """A file without SMALL whose shape set is large (an upstream example's main() sizes) is checked at the
    tuner gate's reduced shapes — same config, same tiles — in seconds, and the output says which; a kernel
    that computes the wrong thing is still caught there."""
    big = (EXAMPLES / "add.py").read_text().replace("x=bf16[1024, 1024], y=bf16[1024, 1024]",
                                                    "x=bf16[4096, 4608], y=bf16[4096, 4608]")
    big = big[: big.index("SMALL =")]
    good = tmp_path / "big_add.py"
    good.write_text(big)
    code, out = _check(good, capsys)
    assert code == 0, out
    assert out.splitlines()[1].split()[-3:-1] == ["ok", "ok"]
    note = next(line for line in out.splitlines() if line.startswith("add: run at "))
    assert "reduced from x=bf16[4096, 4608], y=bf16[4096, 4608] (the same tiles" in note
    wrong = tmp_path / "big_add_wrong.py"
    wrong.write_text(big.replace("x[block] + y[block]", "x[block] - y[block]"))
    code, out = _check(wrong, capsys)
    assert code == 1 and "MISMATCH" in out.splitlines()[1], out


UNSEEN = """
import helion
import helion.language as hl
import torch


@helion.kernel(static_shapes=True)
def ragged_softmax(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for tile_b in hl.tile(x.size(0)):
        for tile_k in hl.jagged_tile(lengths[tile_b]):
            out[tile_b, tile_k] = torch.softmax(x[tile_b, tile_k], dim=1)
    return out
{reference}

SMALL = {{"x": "f32[16, 128]", "lengths": "i32[16]"}}
"""

RAGGED_SOFTMAX = """

def reference(x, lengths):
    out = torch.zeros_like(x)
    for b in range(x.size(0)):
        out[b, : int(lengths[b])] = torch.softmax(x[b, : int(lengths[b])], 0)
    return out
"""


@libtpu
def test_check_fails_a_row_the_tpu_compiler_rejects_before_interpreting_it(tmp_path, capsys):
    """Interpret mode runs this kernel right, but Mosaic copies no strided lanes (a v5e said so of the conformance
    case slice_strided on the chip): the row is the compiler's verdict on the kernel's line, not an `ok` the chip
    would contradict."""
    case = (REPO / "tests/conformance/kernels/slice_strided.py").read_text()
    path = tmp_path / "strided_lanes.py"
    path.write_text(case.replace("@helion.kernel", "# helion: args(src=f32[64, 32], dst=f32[64, 32])\n@helion.kernel", 1))
    code, out = _check(path, capsys)
    row = out.splitlines()[1]
    assert code == 1 and "REJECTED BY THE TPU COMPILER HPL401 line 16: " in row and "Stride on last dim" in row, out
    assert "(ran interpret mode on this CPU for v7x; the TPU compiler's verdict from the deviceless libtpu" in out


@libtpu
def test_check_does_not_call_ok_what_the_tpu_compiler_never_answered(capsys, monkeypatch, tmp_path):
    """A libtpu compile that does not end (upstream jagged_layer_norm's: on a TPU v5e its compile ran for minutes
    and never finished) is stopped at check's limit, leaving an interpret-mode pass unverified: the row fails,
    gives the interpret-mode verdict and says the compiler's is unknown and how long its compile ran. The
    kernel's other strategies are not sent to it, and a later check remembers the stopped compile instead of
    waiting on it again."""
    from compiler.tpu import check_compile

    monkeypatch.setenv("HELION_LS_ANALYSIS_CACHE", str(tmp_path / "analysis.sqlite"))
    monkeypatch.setattr(check_compile, "LIMIT", 0.01)  # the real worker, stopped before it can answer
    asked = []
    real = compiler.CompiledKernel.check_tpu_compile
    monkeypatch.setattr(compiler.CompiledKernel, "check_tpu_compile",
                        lambda ck, *a, **kw: asked.append(dict(ck.config).get("pallas_loop_type")) or real(ck, *a, **kw))
    code, out = _check(REPO / "tests" / "conformance" / "kernels" / "attention_exp2.py", capsys, loop_types=("unroll", "fori_loop"))
    rows = out.splitlines()[1:3]
    assert code == 1 and all("UNVERIFIED: ok in interpret mode, but the TPU compiler's verdict is unknown" in r
                             for r in rows), out
    assert "its deviceless compile ran 0 s without finishing and was stopped; its other strategies are not sent" in out
    assert asked == ["unroll"], asked  # never repeated per strategy
    assert out.rstrip().endswith("0 passed, 2 failed"), out

    code, out = _check(REPO / "tests" / "conformance" / "kernels" / "attention_exp2.py", capsys, loop_types=("unroll",))
    assert asked == ["unroll"], asked  # remembered: not asked again
    assert "an earlier check's compile of this code ran 0 s without finishing (remembered; not asked again)" in out


def test_check_says_when_the_eager_reference_cannot_run_a_kernel(tmp_path, capsys, without_libtpu):
    """Not a MISMATCH: nothing was compared with it. The file's own reference() still judges the kernel; with
    none, nothing compared the kernel at all and the row does not pass."""
    judged = tmp_path / "judged.py"
    judged.write_text(UNSEEN.format(reference=RAGGED_SOFTMAX))
    code, out = _check(judged, capsys)
    row = out.splitlines()[1]
    assert code == 0 and "NOT CHECKED (the eager reference cannot run it: " in row and row.split()[-2] == "ok", out
    assert "MISMATCH" not in out
    alone = tmp_path / "alone.py"
    alone.write_text(UNSEEN.format(reference=""))
    code, out = _check(alone, capsys)
    assert code == 1 and "NOT CHECKED" in out.splitlines()[1] and out.strip().endswith("0 passed, 1 failed"), out


def test_check_judges_an_f32_output_of_half_precision_values_as_half_precision():
    """upstream se_block_bwd_dx stores acc.to(f16) into an f32 tensor: its values are f16 numbers, and one f16
    ulp (0.25 at 258) between two summation orders is no mismatch. Integer values keep f32's bounds."""
    from compiler.check import compare

    torch.manual_seed(0)
    want = (torch.randn(1024) * 100).half().float()
    want[7] = 258.0
    got = want.clone()
    got[7] = 258.25  # the next f16 number
    assert compare(got, want) is None
    assert compare(got.double(), want.double()) is None
    assert compare(want * 1.05, want) is not None  # 5%: far beyond f16 rounding
    plain = torch.randn(1024) * 100  # f32 values: f32's bounds
    assert compare(plain + 0.25 * (plain.abs() > 50), plain) is not None
    counts = torch.arange(1024, dtype=torch.float32)
    assert compare(counts + 2.0, counts) is not None  # integers: f32 bounds, 2 off is wrong


def test_check_compares_fp8_outputs_within_one_of_their_ulps():
    from compiler.check import compare

    want = torch.tensor([1.0, 1.5, -3.0, 0.25] * 32).to(torch.float8_e4m3fn)
    assert compare(torch.tensor([1.125, 1.5, -3.0, 0.25] * 32).to(torch.float8_e4m3fn), want) is None  # 1 ulp
    assert compare(torch.tensor([1.5, 1.5, -3.0, 0.25] * 32).to(torch.float8_e4m3fn), want) is not None  # 4 ulps


def test_check_does_not_interpret_a_kernel_for_minutes(tmp_path, capsys):
    """Inputs too large to interpret in reasonable time (here a SMALL that is not; upstream mamba2, whose asserts
    keep its sequence length) get a NOT RUN row saying what and why, at once, instead of minutes of silence."""
    huge = tmp_path / "huge_add.py"
    huge.write_text((EXAMPLES / "add.py").read_text().replace('SMALL = {"x": "f32[256, 512]", "y": "f32[256, 512]"}',
                                                              'SMALL = {"x": "f32[8192, 8192]", "y": "f32[8192, 8192]"}'))
    code, out = _check(huge, capsys)
    row = out.splitlines()[1]
    assert code == 1 and "NOT RUN (" in row and "134,217,728 tensor elements at x=f32[8192, 8192]" in row, out
