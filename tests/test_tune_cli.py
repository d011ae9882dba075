"""`helion-pallas tune` end to end: a real subprocess with the process-pool executor, and usage errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import EXAMPLES, MACHINE_TPU, REPO, on_tpu, without_tpu

from compiler.cli import main

SOFTMAX = str(EXAMPLES / "softmax.py")
RESULT_KEYS = {"kernel", "shape_set", "chip", "evaluator", "best", "evaluated", "pruned", "top"}
BEST_KEYS = {"config", "seconds", "tflops", "gbps", "roofline_fraction"}


def test_json_and_progress_from_a_subprocess(tmp_path) -> None:
    store = tmp_path / "store.sqlite"
    cmd = [
        sys.executable,
        "-m",
        "compiler.cli",
        "tune",
        SOFTMAX,
        "--max-evals",
        "4",
        "--json",
        "--progress",
        "jsonl",
        "--store",
        str(store),
        "--executor",
        "local:2",
    ]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)
    assert isinstance(results, list) and len(results) == 2  # every shape set of the file
    for index, result in enumerate(results):
        assert RESULT_KEYS <= set(result)
        assert result["kernel"] == "softmax" and result["chip"] == "v7x" and result["evaluator"] == "model"
        assert result["shape_set"]["index"] == index
        assert result["estimate"] is True
        assert BEST_KEYS <= set(result["best"])
        assert result["best"]["config"]["block_sizes"][0] in (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
        assert result["best"]["correctness"]["verdict"] == "ok"
        assert result["best"]["decorator"].startswith(
            "@helion.kernel(static_shapes=True, config=helion.Config("
        )
        assert result["evaluated"] == 4
        assert result["top"][0]["config"] == result["best"]["config"]
        assert 0 < result["best"]["roofline_fraction"] <= 1
    events = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    assert {e["event"] for e in events} == {"progress", "done"}
    done = [e for e in events if e["event"] == "done"]
    assert [e["shape_set_index"] for e in done] == [0, 1]
    assert all(e["best_config"] == r["best"]["config"] for e, r in zip(done, results, strict=True))
    assert "\r" not in proc.stderr  # no progress bar: stderr is not a terminal and --progress is set
    assert store.exists()


def test_text_report_with_decorator_line(tmp_path, capsys) -> None:
    code = main(
        [
            "tune",
            SOFTMAX,
            "--shape-set",
            "1",
            "--max-evals",
            "3",
            "--executor",
            "inline",
            "--store",
            str(tmp_path / "s.sqlite"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "model estimates for v7x" in out
    assert "3 configs evaluated" in out and "pruned" in out
    assert "@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[" in out
    assert "correctness: ok" in out


def test_usage_errors_exit_2(tmp_path, capsys) -> None:
    store = ["--store", str(tmp_path / "s.sqlite"), "--executor", "inline"]
    assert main(["tune", SOFTMAX, "-k", "nope", *store]) == 2
    assert "no kernel 'nope'" in capsys.readouterr().err
    assert main(["tune", SOFTMAX, "--shape-set", "5", *store]) == 2
    assert "out of range" in capsys.readouterr().err
    assert main(["tune", str(tmp_path / "missing.py"), *store]) == 2
    assert main(["tune", SOFTMAX, "--executor", "carrier-pigeon", "--store", str(tmp_path / "s.sqlite")]) == 2
    assert "unknown executor" in capsys.readouterr().err
    assert main(["tune", SOFTMAX, "--chip", "v99", *store]) == 2


def test_kernel_errors_exit_1(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import helion\nimport helion.language as hl\nimport torch\n\n\n"
        "@helion.kernel(static_shapes=True)\ndef k(x: torch.Tensor) -> torch.Tensor:\n"
        "    out = torch.empty_like(x)\n    for t in hl.tile(x.size(0)):\n        out[t] = x[t] * 2\n    return out\n"
    )
    assert main(["tune", str(bad), "--executor", "inline", "--store", str(tmp_path / "s.sqlite")]) == 1
    assert "args" in capsys.readouterr().err  # no '# helion: args(...)' line and no --args


@without_tpu
def test_tpu_evaluator_refuses_clearly_without_a_tpu(tmp_path, capsys) -> None:
    code = main(
        [
            "tune",
            SOFTMAX,
            "--shape-set",
            "1",
            "--evaluator",
            "tpu",
            "--executor",
            "inline",
            "--store",
            str(tmp_path / "s.sqlite"),
        ]
    )
    assert code == 1
    err = capsys.readouterr().err
    assert "tpu evaluator cannot run" in err and "no TPU" in err


def _tune_json(tmp_path, *extra: str) -> list[dict]:
    cmd = [sys.executable, "-m", "compiler.cli", "tune", SOFTMAX, "--max-evals", "12", "--json",
           "--store", str(tmp_path / f"store{len(list(tmp_path.glob('store*')))}.sqlite"), *extra]
    env = {**os.environ, "HELION_LS_ANALYSIS_CACHE": str(tmp_path / "analysis.sqlite")}
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _answers(results: list[dict]) -> list[tuple]:
    return [(r["shape_set"]["index"], r["best"]["config"], r["best"]["seconds"], r["evaluated"], r["pruned"],
             r["pruned_reasons"], [t["config"] for t in r["top"]], r["best"]["correctness"]["verdict"])
            for r in results]


def test_shape_sets_searched_at_once_give_the_same_answers_and_verdicts_are_remembered(tmp_path) -> None:
    one_by_one = _tune_json(tmp_path, "--jobs", "1")
    at_once = _tune_json(tmp_path, "--jobs", "2")  # a new store: nothing to start from; the same analysis cache
    assert _answers(at_once) == _answers(one_by_one)
    # Within one run a shape set whose winner and reduced shapes match an earlier set's may find its verdict
    # already kept (or not: the keeping races the next gate); the first set checked has nothing to find.
    assert not all("remembered" in r["best"]["correctness"]["message"] for r in one_by_one)
    assert all(r["best"]["correctness"]["message"].endswith("(remembered)") for r in at_once)


@without_tpu
def test_auto_is_the_model_on_a_machine_without_a_tpu(tmp_path, capsys) -> None:
    """--evaluator auto (the editor's default) times on the chip only where there is one of the chip tuned for;
    here there are no TPU device nodes, so it is the model, with no worker started to ask."""
    store = ["--store", str(tmp_path / "s.sqlite")]
    assert main(["tune", SOFTMAX, "--shape-set", "1", "--evaluator", "auto", "--max-evals", "4", "--json", *store]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["evaluator"] == "model" and result["best"]["evaluator"] == "model" and result["best"]["estimate"]


def test_the_light_argument_list_names_every_evaluator() -> None:
    from compiler.tune.arguments import EVALUATOR_NAMES
    from compiler.tune.evaluators import EVALUATORS

    assert EVALUATOR_NAMES == sorted(EVALUATORS)


MISCOMPILE = '''
import sys

import compiler
import compiler.api
from compiler.tune.driver import TuneOptions, tune
from compiler.tune.evaluators import Problem

original = compiler.api.Kernel.compile
winners = []


def miscompile(self, args=None, config=None, chip="v7x", shape_set=None, **kwargs):
    ck = original(self, args, config, chip, shape_set, **kwargs)
    if dict(ck.config) in winners:  # each shape set's winner computes the wrong thing
        ck.source = ck.source.replace("axis=1)", "axis=0)")
    return ck


if __name__ == "__main__":  # the gate worker is spawned: it imports this file as its main module
    path = sys.argv[1]
    source = open(path).read()
    kernel = compiler.load(source).kernels["softmax"]
    winners += [tune(Problem(source, "softmax", s, "v7x", path, i), TuneOptions(max_evals=12, verify=False)).top[0].config
                for i, s in enumerate(kernel.shape_sets)]
    compiler.api.Kernel.compile = miscompile
    from compiler.cli import main
    sys.exit(main(["tune", path, "--max-evals", "12", "--json", "--jobs", "2", "--store", sys.argv[2]]))
'''


def test_a_wrong_winner_is_caught_when_tuning_cold_with_shape_sets_searched_at_once(tmp_path) -> None:
    """The whole cold path — a forked search process that compiles its winner for the gate, the gate worker
    and its forked reference process, an empty analysis cache — still catches generated code that computes
    the wrong thing: each shape set's winner is rejected as wrong and its runner-up is checked and reported."""
    script = tmp_path / "miscompile.py"
    script.write_text(MISCOMPILE)
    env = {**os.environ, "HELION_LS_ANALYSIS_CACHE": str(tmp_path / "analysis.sqlite")}
    proc = subprocess.run([sys.executable, str(script), SOFTMAX, str(tmp_path / "store.sqlite")], cwd=REPO,
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout)
    assert len(results) == 2
    for r in results:
        assert [x["verdict"] for x in r["rejected"]] == ["wrong"], r["rejected"]
        assert r["best"]["config"] != r["rejected"][0]["config"]
        assert r["best"]["correctness"]["verdict"] == "ok"


EARLY_ELSEWHERE = '''
import compiler
from compiler.tune.driver import TuneOptions
from compiler.tune.evaluators import Problem
from compiler.tune.parallel import search_elsewhere

path = {path!r}
source = open(path).read()
kernel = compiler.load(source).kernels["attention"]
problems = [Problem(source, "attention", s, "v7x", path, i) for i, s in enumerate(kernel.shape_sets)]
problems[0].load_kernel().config_space(problems[0].args, "v7x")
offered = []
elsewhere = search_elsewhere(problems, TuneOptions(), None, None, None, 2,
                             lambda i, config, case: offered.append((i, config, case)))
searched = elsewhere[1].take(1)
# a standing best was sent early, compiled for the gate; where it is still the winner its case is not compiled again
early = [(i, type(case).__name__) for i, _, case in offered] == [(1, "GateCase")]
same = searched.gate.config == offered[0][1]
print(early, same == (searched.candidates[0].config == offered[0][1]),
      not same or searched.gate.prepare_seconds == offered[0][2].prepare_seconds)
'''


def test_a_forked_search_sends_its_standing_best_for_the_gate_before_it_ends(tmp_path) -> None:
    """attention 32k, searched in a forked process, finds its winner halfway: the winner, compiled for the
    gate's reduced shapes, reaches the parent's `on_early` before the search's outcome (the parent then
    starts its check while the searches go on); the outcome carries that same compiled case."""
    code = EARLY_ELSEWHERE.format(path=str(EXAMPLES / "attention.py"))
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.stdout.split() == ["True", "True", "True"], proc.stderr[-3000:]


@on_tpu
def test_auto_measures_on_this_machines_tpu(tmp_path, capsys) -> None:
    """On a TPU VM, --evaluator auto for the machine's own chip times the model's best candidates there."""
    store = ["--store", str(tmp_path / "s.sqlite")]
    argv = ["tune", SOFTMAX, "--shape-set", "0", "--chip", str(MACHINE_TPU.chip), "--evaluator", "auto",
            "--max-evals", "4", "--json", *store]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["evaluator"] == "tpu" and result["best"]["evaluator"] == "tpu", result

