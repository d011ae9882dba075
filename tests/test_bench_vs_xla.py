"""bench/vs_xla.py's logic on a CPU (TPU interpret mode, tiny shapes): our kernel and XLA's version of the same
computation agree before anything is timed, and a version that disagrees is said to, not timed."""

from __future__ import annotations

import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))

import vs_xla  # noqa: E402


def test_each_kernel_agrees_with_xla_and_is_timed_beside_it(capsys) -> None:
    assert vs_xla.main(["--interpret", "--tiny", "--chip", "v5e", "--only", "softmax", "rms_norm_bwd",
                        "--evals", "20"]) == 0
    out = capsys.readouterr().out
    assert out.count("XLA (jnp): ") == 2 and "ours is" in out and "DISAGREES" not in out, out


def test_a_version_that_computes_something_else_is_not_timed(capsys, monkeypatch) -> None:
    wrong = vs_xla.Case("softmax", "examples/softmax.py", "softmax", "", "x=bf16[256, 256]", lambda x: x * 2)
    monkeypatch.setattr(vs_xla, "CASES", (wrong,))
    assert vs_xla.main(["--interpret", "--tiny", "--chip", "v5e", "--evals", "20"]) == 0
    assert "XLA (jnp): DISAGREES with ours" in capsys.readouterr().out
