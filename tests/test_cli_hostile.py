"""The command line against bad input (issue 10): real `python -m compiler.cli` subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import child_pythonpath

REPO = Path(__file__).resolve().parents[1]
ADD = REPO / "examples" / "add.py"


def cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": child_pythonpath(), "JAX_PLATFORMS": "cpu"}
    return subprocess.run(
        [sys.executable, "-m", "compiler.cli", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


SIDE_EFFECTS = '''import pathlib

import helion
import helion.language as hl
import torch

MARKS = pathlib.Path(MARKS_DIR)
MARKS.mkdir(exist_ok=True)
(MARKS / "top level").write_text("ran")


def mark(what):
    (MARKS / what).write_text("ran")
    return what


class Meta(type):
    def __new__(mcs, name, bases, namespace):
        mark("metaclass")
        return super().__new__(mcs, name, bases, namespace)


class Thing(metaclass=Meta):
    mark("class body")


SCALE = 2.0


def helper(v):
    return v * SCALE


# helion: args(x=f32[256, 256])
@helion.kernel(static_shapes=True, settings=mark("decorator argument"))
def scale(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = helper(x[tile])
    return out


if __name__ == "__main__":
    mark("main")
'''


def side_effects(marks: Path) -> str:
    """SIDE_EFFECTS marking in `marks` (an absolute path: the reference may run under another file name)."""
    return SIDE_EFFECTS.replace("MARKS_DIR", repr(str(marks)))


# the same file without its shape line: main() gives the kernel its shapes, and still nothing of it runs
FROM_CALLS = (SIDE_EFFECTS.replace("# helion: args(x=f32[256, 256])\n", "")
              .replace('    mark("main")', '    mark("main")\n    scale(torch.randn(256, 256))\n    while True:\n'
                                          '        mark("loop")'))


@pytest.mark.parametrize("command, from_calls", [("check", False), ("tune", False), ("check", True), ("tune", True)])
def test_check_and_tune_run_only_what_the_kernel_needs(tmp_path, command, from_calls):
    path = tmp_path / "side_effects.py"
    marks = tmp_path / "side_effects.ran"
    path.write_text((FROM_CALLS if from_calls else SIDE_EFFECTS).replace("MARKS_DIR", repr(str(marks))))
    extra = ["--max-evals", "3", "--store", str(tmp_path / "store.sqlite")] if command == "tune" else []
    done = cli(command, str(path), *extra)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok" in done.stdout  # the kernel was checked against its eager reference
    assert not marks.exists(), sorted(p.name for p in marks.iterdir())
    if from_calls and command == "tune":
        assert "(on x=f32[256, 256])" in done.stdout  # the shapes main() calls it with


def test_check_reports_a_syntax_error_in_one_line(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("import helion\n\n\ndef f(:\n    pass\n")
    done = cli("check", str(path))
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[0] == f"{path}:4:7: error HPL100: syntax error: invalid syntax"


@pytest.mark.parametrize("command", ["compile", "check", "tune"])
def test_a_directory_is_said_to_be_a_directory(tmp_path, command):
    done = cli(command, str(tmp_path))
    assert done.returncode == 2
    assert "is a directory" in done.stderr.lower() and "syntax" not in done.stderr


def test_unknown_config_keys_are_an_error_listing_the_valid_ones():
    done = cli("compile", str(ADD), "--config", '{"zzz": 1}')
    assert done.returncode == 2
    assert "unknown config key 'zzz'" in done.stderr
    assert "block_sizes" in done.stderr and "pallas_loop_type" in done.stderr


def test_helion_config_keys_are_accepted_and_round_trip():
    config = {
        "block_sizes": [256, 512],
        "loop_orders": [[0, 1]],
        "flatten_loops": [False],
        "l2_groupings": [1],
        "range_num_stages": [2],
        "range_unroll_factors": [0],
        "num_warps": 4,
        "num_stages": 3,
        "indexing": "pointer",
        "pid_type": "flat",
        "pallas_pre_broadcast": True,
    }
    done = cli("compile", str(ADD), "--config", json.dumps(config), "--emit", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["config"] == config


@pytest.mark.parametrize("where", ["a directory", "under a file"])
def test_an_unwritable_store_is_an_error_and_the_results_are_still_shown(tmp_path, where):
    if where == "a directory":
        store = tmp_path / "store.sqlite"
        store.mkdir()
        said = "it is a directory"
    else:
        (tmp_path / "plain").write_text("a file")
        store = tmp_path / "plain" / "store.sqlite"
        said = "is a file, not a directory"
    done = cli("tune", str(ADD), "--shape-set", "0", "--max-evals", "4", "--store", str(store), "--json")
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if "error" in line and said in line]
    assert len(errors) == 2, done.stderr  # before tuning, and again after the results
    result = json.loads(done.stdout)
    assert result["best"]["config"]["block_sizes"] and said in result["store_error"]


def test_compile_of_a_file_whose_calls_never_end_warns_and_uses_the_shapes_found_before(tmp_path):
    path = tmp_path / "forever.py"
    path.write_text(FROM_CALLS.replace("MARKS_DIR", repr(str(tmp_path / "marks"))))
    done = cli("compile", str(path), "--emit", "vmem", timeout=300)
    assert done.returncode == 0, done.stderr
    assert "-> fits" in done.stdout
    loop = path.read_text().splitlines().index("    while True:") + 1
    assert f"{path}:{loop}:5: warning HPL112: finding kernel shapes from this file's calls: stopped after" \
        in done.stderr
    assert "scale: shape set 0 of 1, x=f32[256, 256], from scale(torch.randn(256, 256))" in done.stderr
