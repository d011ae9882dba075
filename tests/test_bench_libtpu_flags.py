"""bench/libtpu_flags.py: a libtpu option is usable for the tuner's verdict only where every compile tells the gate
exactly what the default compile does (accepted or rejected alike, the same VMEM figures)."""

from __future__ import annotations

import json
import sys

from conftest import REPO
from test_checks_libtpu import libtpu

sys.path.insert(0, str(REPO / "bench"))

import libtpu_flags  # noqa: E402

ACCEPTED = {"ok": True, "kind": None, "vmem_used_bytes": 66363392, "requested_bytes": None,
            "vmem_limit_bytes": 67043328, "vmem_operand_bytes": 0, "oom_limit": None}
REJECTED = {"ok": False, "kind": "vmem_oom", "vmem_used_bytes": None, "requested_bytes": 70558679,
            "vmem_limit_bytes": None, "vmem_operand_bytes": None, "oom_limit": "capacity"}


def test_only_an_identical_verdict_and_vmem_figure_is_the_same() -> None:
    assert libtpu_flags.same_verdict(ACCEPTED, dict(ACCEPTED))
    assert libtpu_flags.same_verdict(REJECTED, dict(REJECTED))
    # the scheduler switched off (2026-12-07): attention 8k's winner rejected, needing 73798779 bytes
    assert not libtpu_flags.same_verdict(ACCEPTED, {**REJECTED, "requested_bytes": 73798779})
    # still accepted, with another VMEM use: a config near the limit could flip
    assert not libtpu_flags.same_verdict(ACCEPTED, {**ACCEPTED, "vmem_used_bytes": 66363392 + 8192})
    # rejected alike, with another need: the gate's shortfall would differ
    assert not libtpu_flags.same_verdict(REJECTED, {**REJECTED, "requested_bytes": 77993083})


@libtpu
def test_a_flag_set_is_compiled_beside_the_default_and_compared(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(libtpu_flags, "WINNERS", (("add", 0, "v7x", {"block_sizes": [256, 512]}),))
    out = tmp_path / "flags.json"
    assert libtpu_flags.main(["--winners-only", "--flags=--xla_jf_run_verifier=false", "--json", str(out)]) == 0
    record = json.loads(out.read_text())
    assert [s["flags"] for s in record["summary"]] == ["", "--xla_jf_run_verifier=false"]
    (row,) = record["rows"]
    default, other = row["runs"]
    assert default["ok"] and default["vmem_used_bytes"] and default["cpu_s"] > 0, default
    assert other["same"] and record["summary"][1]["differ"] == [], record["summary"]
    assert "same" in capsys.readouterr().out
