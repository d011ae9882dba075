"""Every tuned figure says what it is: measured on the named TPU, or an estimate for the named chip — on the lens,
in the message after a tuning and in the kernel hover (the LS tests check the model's words end to end)."""

from compiler.ir.config import Config
from compiler.tune.evidence import evidence
from compiler.tune.store import Trial
from helion_ls.features.codelens import best_title
from helion_ls.store import Summary


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
