"""bench/vllm_check.py on our own vLLM-style kernels (tests/kernels/vllm_style/): the dated table of issue 40 cannot
rot. One kernel that passes and one that cannot run on a TPU (packed fp4 inputs: one diagnostic)."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import vllm_check  # noqa: E402

KERNELS = Path(__file__).resolve().parent / "kernels" / "vllm_style"


def test_the_table_has_every_register_kernel_kernel_its_verdicts_and_the_summary(tmp_path, capsys) -> None:
    out = tmp_path / "rows.json"
    assert vllm_check.main([str(KERNELS), "--files", "fp4_dot.py,scaled_rows.py", "--loop-types", "unroll",
                            "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("`check --chip v5e` of every register_kernel kernel, 20")  # dated
    assert "| kernel | file | declared | shape sets | unroll | diagnostic (when not ok) |" in text
    data = json.loads(out.read_text())
    rows = {r["kernel"]: r for r in data["rows"]}
    assert set(rows) == {"fp4_row_sums", "scaled_rows"} and data["kernels"] == 2
    fp4 = rows["fp4_row_sums"]
    assert not fp4["passes"] and fp4["shape_sets"] == "none" and fp4["declared"] == "register_kernel"
    assert fp4["diagnostic"].startswith("bad inputs: HPL203") and "float4_e2m1fn_x2" in fp4["diagnostic"]
    scaled = rows["scaled_rows"]
    assert scaled["declared"] == "register_kernel + Settings" and scaled["shape_sets"] == "8 cases of make_cases()"
    # ok where libtpu answered; "unverified" where it is not installed (CI): right in interpret mode either way
    assert list(scaled["verdicts"]) == ["-"] and scaled["verdicts"]["-"] in ("ok", "unverified"), scaled  # no inner loop
    assert f"**{int(scaled['passes'])} of 2 pass**" in text
