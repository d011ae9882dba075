"""bench/upstream_check.py on a CPU: a folder's kernels checked into JSON rows, a run cut short carried on by the
same --out, and the comparison of a chip's run with a CPU's failing on a row the CPU calls ok and the chip not."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
from conftest import EXAMPLES, REPO

sys.path.insert(0, str(REPO / "bench"))

import upstream_check  # noqa: E402


def test_a_folder_becomes_rows_and_a_second_run_carries_on(tmp_path, capsys) -> None:
    folder = tmp_path / "upstream"
    folder.mkdir()
    shutil.copy(EXAMPLES / "add.py", folder / "add.py")
    out = tmp_path / "run.json"
    assert upstream_check.main([str(folder), "--out", str(out)]) == 0
    run = json.loads(out.read_text())
    assert [r["verdict"] for r in run["files"]["add.py"]["rows"]] == ["ok"], run
    assert "interpret mode on this CPU for v5e" in run["files"]["add.py"]["where"]
    shutil.copy(EXAMPLES / "softmax.py", folder / "softmax.py")
    capsys.readouterr()
    assert upstream_check.main([str(folder), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "softmax.py: ok" in printed and "add.py" not in printed, printed  # add.py was done already
    assert set(json.loads(out.read_text())["files"]) == {"add.py", "softmax.py"}


def test_the_comparison_fails_on_a_cpu_ok_the_chip_refused(tmp_path, capsys) -> None:
    def run(*verdicts: str) -> str:
        path = tmp_path / f"{'-'.join(verdicts)}.json"
        rows = [{"kernel": f"k{i}", "loop_type": "unroll", "verdict": v} for i, v in enumerate(verdicts)]
        path.write_text(json.dumps({"files": {"f.py": {"rows": rows, "where": ""}}}))
        return str(path)

    assert upstream_check.main(["--compare", run("ok", "rejected HPL401"), run("ok", "rejected HPL401")]) == 0
    assert "2 with the same verdict; 1 ok on the chip" in capsys.readouterr().out
    assert upstream_check.main(["--compare", run("ok", "failed"), run("ok", "ok")]) == 1
    out = capsys.readouterr().out
    assert "f.py k1 unroll: chip failed, CPU ok" in out and "failed on the chip: 1" in out, out



class _Ended(Exception):
    pass


def test_a_file_past_the_limit_is_recorded_without_rows_and_the_next_run_goes_on(tmp_path, monkeypatch) -> None:
    """A compile that never ends (upstream jagged_layer_norm on a TPU v5e) must not take the folder with it: the
    file is written down as unfinished, the process ends with status 3, and the same --out carries on after it."""
    import threading

    folder = tmp_path / "upstream"
    folder.mkdir()
    for name in ("a.py", "b.py"):
        shutil.copy(EXAMPLES / "add.py", folder / name)
    out = tmp_path / "run.json"
    statuses: list[int] = []
    ended = threading.Event()

    def hang(path, chip, loop_types):  # as a compile nothing interrupts: only the limit's timer ends the process
        assert ended.wait(30), "the limit did not end the run"
        raise _Ended

    def process_exit(status):  # os._exit, which would end pytest too
        statuses.append(status)
        ended.set()

    real_report = upstream_check.file_report
    monkeypatch.setattr(upstream_check, "file_report", hang)
    monkeypatch.setattr(upstream_check.os, "_exit", process_exit)
    with pytest.raises(_Ended):
        upstream_check.main([str(folder), "--out", str(out), "--file-limit", "1"])
    assert statuses == [upstream_check.UNFINISHED]
    run = json.loads(out.read_text())
    assert run["files"]["a.py"]["rows"] == [] and run["files"]["a.py"]["notes"] == ["no verdict: still running after 1 s"]
    monkeypatch.setattr(upstream_check, "file_report", real_report)
    assert upstream_check.main([str(folder), "--out", str(out), "--file-limit", "60"]) == 0
    run = json.loads(out.read_text())
    assert run["files"]["a.py"]["rows"] == [] and [r["verdict"] for r in run["files"]["b.py"]["rows"]] == ["ok"]
