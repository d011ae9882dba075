"""`helion-pallas compile / check / tune` on a file without shape lines: the shape sets come from the file's
own calls (tests/upstream_style/rows.py, where main() calls check(64, 256) and check(128, 512))."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from compiler.cli import main

ROWS = Path(__file__).parent / "upstream_style" / "rows.py"
CALL_LINE = ROWS.read_text().splitlines().index("        check(m, n)") + 1


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compiler.cli", *args], capture_output=True, text=True, timeout=600)


def test_compile_uses_the_inferred_shape_set_and_says_where_it_came_from():
    res = run("compile", str(ROWS), "-k", "rms_fwd", "--shape-set", "1", "--emit", "vmem")
    assert res.returncode == 0, res.stderr
    assert "-> fits" in res.stdout
    assert res.stderr.splitlines()[0] == (
        f"helion-pallas: rms_fwd: shape set 1 of 2, x=bf16[128, 512], weight=bf16[512], eps=1e-06, "
        f"from check(128, 512) at line {CALL_LINE}")


def test_compile_of_a_kernel_nothing_calls_is_the_hint():
    res = run("compile", str(ROWS), "-k", "never_called")
    assert res.returncode == 1
    assert "information HPL107: `never_called` has no shape set" in res.stderr


def test_check_runs_on_the_inputs_the_calls_describe(capsys):
    from compiler.check import check_file

    code = check_file(str(ROWS), "rms_fwd", "v7x", ["unroll"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.splitlines()[1].split()[:1] == ["rms_fwd"] and " ok " in out.splitlines()[1]


def test_tune_tunes_each_inferred_shape_set(tmp_path, capsys):
    store = ["--store", str(tmp_path / "s.sqlite"), "--executor", "inline", "--max-evals", "2"]
    code = main(["tune", str(ROWS), "-k", "row_scale", *store])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "(on x=bf16[64, 256], scale=0.5)" in out and "(on x=bf16[128, 512], scale=0.5)" in out
