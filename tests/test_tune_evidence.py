"""Every tuned figure says what it is: measured on the named TPU, or an estimate for the named chip — on the lens,
in the message after a tuning and in the kernel hover (the LS tests check the model's words end to end)."""

from compiler.ir.config import Config
from compiler.tune.evidence import evidence
from compiler.tune.store import Trial
from helion_ls.features.codelens import best_title, best_tooltip
from helion_ls.session.store import Summary


def test_each_evaluator_names_what_its_figures_are():
    assert evidence("tpu", "v5e") == "measured on TPU v5 lite"
    assert evidence("tpu", "v7x") == "measured on TPU7x"
    assert evidence("model", "v7x") == "model estimate for v7x"
    assert evidence("schedule", "v6e") == "TPU compiler's estimate for v6e"
    assert evidence("compile", "v5e").startswith("model estimate for v5e")


def _trial(config: dict, seconds: float, evaluator: str) -> Trial:
    return Trial(config, seconds, "ok", {}, evaluator, 0.0)


def test_a_lens_of_a_chip_measurement_names_the_machine_and_an_estimate_the_chip():
    current = {"block_sizes": [128]}
    measured = Summary(best=_trial({"block_sizes": [256]}, 1e-3, "tpu"), current=_trial(current, 2e-3, "tpu"),
                       evaluated=30)
    title = best_title(measured, Config(current), None, "v5e")
    assert title.startswith("Best: bs=[256] — 1.00 ms") and title.endswith("[measured on TPU v5 lite]"), title
    estimated = Summary(best=_trial(current, 1e-3, "model"), current=None, evaluated=30)
    title = best_title(estimated, Config(current), None, "v7x")
    assert "(current)" in title and title.endswith("[model estimate for v7x]"), title


def test_a_chip_measurement_says_how_many_runs_and_a_fallback_says_why():
    current = {"block_sizes": [128]}
    metrics = {"repeats": 1200, "spread": 0.013}
    measured = Summary(best=Trial({"block_sizes": [256]}, 1e-3, "ok", metrics, "tpu", 0.0), current=None,
                       evaluated=30)
    title = best_title(measured, Config(current), None, "v5e")
    assert title.endswith("[measured on TPU v5 lite, 1200 runs]"), title
    assert "Spread of the timed loops: 1.3 %." in best_tooltip(measured, Config(current), None)
    why = "another program holds this machine's TPU (libtpu's multi-process lockfile)"
    estimated = Summary(best=_trial({"block_sizes": [256]}, 1e-3, "model"), current=None, evaluated=30)
    title = best_title(estimated, Config(current), None, "v5e", why)
    assert title.endswith("[model estimate for v5e: the TPU was held by another program]"), title
    assert f"Not measured on this machine's TPU: {why}." in best_tooltip(estimated, Config(current), None, why)
    assert best_title(measured, Config(current), None, "v5e", why).endswith("1200 runs]")  # measured after all


def test_a_small_gain_is_short_on_the_lens_and_whole_in_its_tooltip():
    best, now = _trial({"block_sizes": [256]}, 1.000e-3, "model"), _trial({"block_sizes": [128]}, 1.002e-3, "model")
    summary = Summary(best=best, current=now, evaluated=30)
    title = best_title(summary, Config(now.config), None, "v7x")
    assert title == "Best: bs=[256] — 1.00 ms (+0.2 %: too little to apply) [model estimate for v7x]", title
    assert "0.2 % faster than current, under the 2% worth applying." in best_tooltip(summary, Config(now.config), None)


def test_an_auto_tuning_is_labelled_by_what_the_tuner_used():
    """The editor's default evaluator, auto, is tpu where the machine has the chip and the model elsewhere: the
    label follows the evaluator the tuner names in its result, not the one asked for."""
    from helion_ls.features.lens_results import evaluated_by
    from helion_ls.workers.tuning import TuneJob, TuneSpec

    spec = TuneSpec(uri="file:///k.py", kernel="k", shape_set=0, source_hash="h", text="", file_name="k.py", chip="v5e",
                    evaluator="auto", executor="local", store_path=None, budget_seconds=None, max_evals=None)
    assert evaluated_by(TuneJob(spec, best={"config": {}, "evaluator": "tpu"})) == "tpu"
    assert evaluated_by(TuneJob(spec, best={"config": {}, "evaluator": "model"})) == "model"
    assert evaluated_by(TuneJob(spec, best={"config": {}})) == "model"  # a search's progress: the model's best
