"""bench/chip_issue_interval.py: the script that pins the v5e's issue interval on a TPU, run here in interpret mode
on a CPU (its times say nothing about a TPU; what is checked is that every case runs and is recorded)."""

from __future__ import annotations

import json
import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))

import chip_issue_interval  # noqa: E402

import compiler  # noqa: E402


def test_every_case_is_timed_three_ways_and_written(tmp_path) -> None:
    out = tmp_path / "issue.json"
    assert chip_issue_interval.main(["--cpu", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["interpret"] is True and record["chip"] == "v5e"
    names = set(record["cases"])
    assert "xla x + 1 [8, 128]" in names
    assert set(chip_issue_interval.CASES) <= names
    assert "rms_norm_bwd [2048, 2048] without the trailing sum" in names
    for t in record["cases"].values():
        assert t["issue"] > 0 and t["pipelined"] > 0 and t["waited"] > 0 and t["calls_per_loop"] >= 1


def test_the_trailing_sum_it_drops_is_in_the_generated_code() -> None:
    k = compiler.load((REPO / "examples/rms_norm_bwd.py").read_text()).kernels["rms_norm_bwd"]
    specs = k.resolve_args(chip_issue_interval.CASES["rms_norm_bwd [2048, 2048]"][2])
    ck = k.compile(args=specs, config=k.default_config(specs, "v5e"), chip="v5e")
    assert chip_issue_interval.TRAILING_SUM in ck.source
