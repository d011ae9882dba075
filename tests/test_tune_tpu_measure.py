"""bench/tpu_measure.py's logic on a CPU (TPU interpret mode, tiny shapes), and the calibration that reads
its JSON (bench/calibrate.py)."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))

import calibrate  # noqa: E402
import tpu_measure  # noqa: E402

from compiler.tune.constants import constants_for, with_values  # noqa: E402


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    out = tmp_path_factory.mktemp("measure") / "v5e.json"
    argv = ["--interpret", "--tiny", "--chip", "v5e", "--only", "seed", "matmul", "--warmup", "0", "--repeats", "1",
            "--out", str(out)]  # fmt: skip
    assert tpu_measure.main(argv) == 0
    return out


def test_it_checks_times_and_models_every_point_and_records_what_does_not_fit(measured) -> None:
    data = json.loads(measured.read_text())
    assert data["chip"] == "v5e" and data["interpret"] is True and data["tool"] == "bench/tpu_measure.py"
    points = data["points"]
    labels = [(p["group"], p["kernel"], p["label"]) for p in points]
    assert labels == [
        ("seed", "attention", "256 emit_pipeline"),
        ("seed", "attention", "256 unroll"),
        ("seed", "attention", "256 fori_loop"),
        ("seed", "attention", "32k unroll (compiled only)"),
        ("matmul", "matmul", "256^3 blocks [128, 128, 128]"),
        ("matmul", "matmul", "256^3 blocks [128, 256, 256]"),
        ("matmul", "matmul_rhs_t", "256^3 blocks [128, 128, 128]"),
        ("matmul", "matmul_relu", "256^3 blocks [128, 128, 128]"),
    ]
    for p in points:
        assert p["model_seconds"] > 0 and p["flops"] > 0
        if "compiled only" in p["label"]:
            assert p["status"] == "out of VMEM" and p["seconds"] is None and "correctness" not in p
        else:
            assert p["correctness"] == "ok" and p["seconds"] > 0 and p["repeats"] == 1
            assert p["config"]["pallas_loop_type"] in ("emit_pipeline", "unroll", "fori_loop")


def test_calibration_refuses_interpret_mode_times(measured, capsys, monkeypatch) -> None:
    monkeypatch.setattr(sys, "argv", ["calibrate.py", "--measured", str(measured)])
    assert calibrate.main() == 1
    assert "interpret mode" in capsys.readouterr().out


def test_calibration_reads_the_json_and_recovers_the_constants_behind_it(measured, tmp_path) -> None:
    # Replace the (meaningless) interpret-mode times by what known constants predict: fitting the file must
    # then give those constants back.
    truth = with_values(constants_for("v5e"), "[test]", step_overhead=0.5e-6, pipeline_iteration_overhead=0.5e-6,
                        call_overhead=40e-6, mxu_efficiency=0.8)  # fmt: skip
    data = json.loads(measured.read_text())
    for p in data["points"]:
        if p["seconds"] is not None:
            modelled = calibrate.compile_point(calibrate.Point("x", p["file"], p["kernel"], p["args"], p["config"],
                                                               p["size"], p["label"], seconds=1.0), "v5e")  # fmt: skip
            p["seconds"] = modelled.model(truth)
    path = tmp_path / "synthetic.json"
    path.write_text(json.dumps(data))
    chip, interpret, pts = calibrate.load_measured(path)
    assert chip == "v5e" and interpret and len(pts) == 7
    modelled = [calibrate.compile_point(p, chip) for p in pts]
    fitted = calibrate.fit(modelled, constants_for("v5e"), ("step", "call", "mxu"), "[fit] synthetic")
    assert fitted.step_overhead == pytest.approx(0.5e-6, rel=0.02)
    assert fitted.call_overhead == pytest.approx(40e-6, rel=0.02)
    assert fitted.mxu_efficiency == pytest.approx(0.8, rel=0.05)
    assert calibrate.geomean_error([m.error(fitted) for m in modelled]) < 0.005


def test_the_seed_kernels_are_measured_with_their_default_and_tuned_configs() -> None:
    import compiler

    got = list(tpu_measure._kernel_targets("v5e", tiny=True, tune_evals=12))
    assert {t.kernel for t in got} == set(tpu_measure.SEED_KERNELS)
    for t in got:
        assert t.group == "kernels" and t.label in ("default", "tuned")
        kernel = compiler.load((REPO / t.file).read_text()).kernels[t.kernel]
        assert kernel.compile(args=t.args, config=t.config, chip="v5e", emit=False).vmem.verdict != "out_of_vmem"
    defaults = [t for t in got if t.label == "default"]
    assert len(defaults) == 4


def test_the_sweep_measures_the_pick_the_default_and_configs_drawn_across_the_space(tmp_path, capsys) -> None:
    import tune_vs_chip

    import compiler

    out = tmp_path / "sweep.json"
    argv = ["--interpret", "--tiny", "--chip", "v5e", "--only", "sweep", "--kernels", "add", "--sweep", "3",
            "--tune-evals", "20", "--warmup", "0", "--repeats", "1", "--out", str(out)]  # fmt: skip
    assert tpu_measure.main(argv) == 0
    data = json.loads(out.read_text())
    for kernel in ("add",):
        points = [p for p in data["points"] if p["kernel"] == kernel]
        labels = [p["label"] for p in points]  # the default is left out when it is the pick
        assert labels in (["model pick", "default", "sample 1", "sample 2", "sample 3"],
                          ["model pick", "sample 1", "sample 2", "sample 3"])
        assert len({json.dumps(p["config"], sort_keys=True) for p in points}) == len(points)  # no config twice
        source = (REPO / points[0]["file"]).read_text()
        k = compiler.load(source).kernels[kernel]
        for p in points:
            assert p["correctness"] == "ok" and p["seconds"] > 0
            assert k.compile(args=p["args"], config=p["config"], chip="v5e", emit=False).vmem.verdict != "out_of_vmem"
    with pytest.raises(SystemExit, match="interpret mode"):
        tune_vs_chip.main([str(out)])
    # times the model itself predicts: every point within 20 %, the pick is the best (ties aside), pairs in order
    data["interpret"] = False
    for p in data["points"]:
        m = calibrate.compile_point(calibrate.Point("x", p["file"], p["kernel"], p["args"], p["config"], 0, p["label"],
                                                    seconds=1.0), "v5e")  # fmt: skip
        p["seconds"] = calibrate.Modelled(m.point, m.plan, 1.0, dispatch=False).model()
    synthetic = tmp_path / "synthetic.json"
    synthetic.write_text(json.dumps(data))
    tune_vs_chip.main([str(synthetic)])
    printed = capsys.readouterr().out
    assert f"model within ±20%: {len(points)} of {len(points)} points" in printed
    assert "(fewer than 30 configs)" in printed and "NOT MET" in printed  # 5 configs a kernel are not enough


def test_a_plan_is_made_without_a_tpu_and_measured_without_running_the_gate_again(tmp_path, monkeypatch) -> None:
    """--plan-out chooses the sweep's configs and runs the CPU gate on each (any machine); --plan measures them and
    records the planned verdict, so a TPU's time goes to the chip's own work. A plan is for one chip."""
    plan = tmp_path / "plan.json"
    argv = ["--tiny", "--chip", "v5e", "--only", "sweep", "--kernels", "add", "--sweep", "2", "--tune-evals", "20",
            "--plan-out", str(plan)]  # fmt: skip
    assert tpu_measure.main(argv) == 0
    targets = json.loads(plan.read_text())["targets"]
    assert [t["label"] for t in targets][-2:] == ["sample 1", "sample 2"]
    assert all(t["extra"]["cpu_correctness"]["verdict"] == "ok" for t in targets)

    def no_gate(*args, **kwargs):
        raise AssertionError("the gate ran again for a planned target")

    monkeypatch.setattr(tpu_measure, "_gate", no_gate)
    out = tmp_path / "measured.json"
    argv = ["--interpret", "--chip", "v5e", "--plan", str(plan), "--warmup", "0", "--repeats", "1", "--out", str(out)]
    assert tpu_measure.main(argv) == 0
    points = json.loads(out.read_text())["points"]
    assert [p["config"] for p in points] == [t["config"] for t in targets]
    assert all(p["correctness"] == "ok" and p["seconds"] > 0 for p in points)
    with pytest.raises(SystemExit, match="planned for v5e"):
        tpu_measure.main(["--interpret", "--chip", "v6e", "--plan", str(plan), "--out", str(out)])

    # a run cut short goes on where it stopped: the points it has are kept, the rest measured
    data = json.loads(out.read_text())
    data["points"] = data["points"][:2]
    cut = tmp_path / "cut.json"
    cut.write_text(json.dumps(data))
    measured = []
    real = tpu_measure.measure
    monkeypatch.setattr(tpu_measure, "measure", lambda target, *a: measured.append(target.label) or real(target, *a))
    resumed = tmp_path / "resumed.json"
    argv = ["--interpret", "--chip", "v5e", "--plan", str(plan), "--resume", str(cut), "--warmup", "0", "--repeats",
            "1", "--out", str(resumed)]  # fmt: skip
    assert tpu_measure.main(argv) == 0
    assert measured == [t["label"] for t in targets[2:]]
    assert [p["label"] for p in json.loads(resumed.read_text())["points"]] == [t["label"] for t in targets]


def test_a_winner_tuned_on_the_chip_is_held_to_the_sweep_s_best(tmp_path, capsys) -> None:
    """What the v5e said (bench/chip/): softmax tuned with --evaluator tpu, 1.033 ms, against the sweep's best of its
    whole space, 1.027 ms: within 1.02x; batch_softmax, 3.265 ms against 3.163: not. The same softmax winner 10 %
    slower is not either."""
    import tune_vs_chip

    chip = REPO / "bench" / "chip"
    runs = [str(chip / "v5e_sweep_a.json"), str(chip / "v5e_sweep_b.json")]
    every = json.loads((chip / "v5e_tune_tpu.json").read_text())
    tuned = next(result for result in every if result["kernel"] == "softmax")
    assert tune_vs_chip.main([*runs, "--tuned", str(chip / "v5e_tune_tpu.json")]) == 1
    out = capsys.readouterr().out
    assert "softmax {'block_sizes': [256]} 1.033 ms measured, 1.006x the sweep's best (within 1.02x)" in out
    assert "batch_softmax {'block_sizes': [8, 32]} 3.265 ms measured, 1.032x the sweep's best (NOT within 1.02x)" in out
    tuned["best"]["seconds"] *= 1.1
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps(tuned))
    assert tune_vs_chip.main([*runs, "--tuned", str(slow)]) == 1
    assert "1.107x the sweep's best (NOT within 1.02x)" in capsys.readouterr().out


def test_the_picks_group_measures_the_pick_now_and_the_picks_no_sweep_measured() -> None:
    """`--only picks`: the model-only pick as tune_vs_chip asks for it now and, on v5e, the picks the sweeps never
    measured (matmul 8192's [512, 1024, 4096] unrolled ties the measured best in the model), as sweep points so that
    tune_vs_chip reads them beside the sweeps; the default run leaves the group out."""
    import compiler

    found = tpu_measure.targets("v5e", ["picks"], tiny=False, tune_evals=0, kernels=["matmul"])
    assert found and {t.group for t in found} == {"sweep"} and {t.kernel for t in found} == {"matmul"}
    assert found[0].label == "model pick now"
    assert found[0].args == "x=bf16[8192, 8192], y=bf16[8192, 8192]"
    unmeasured = compiler.Config({"block_sizes": [512, 1024, 4096], "pallas_loop_type": "unroll"})
    assert unmeasured in [compiler.Config(t.config) for t in found]
    assert len({repr(compiler.Config(t.config)) for t in found}) == len(found)
    assert tpu_measure.targets("v6e", ["picks"], tiny=True, tune_evals=0, kernels=["add"])[0].label == "model pick now"
