"""Settings validation: good values are typed, bad ones reported and replaced by defaults."""

from __future__ import annotations

import os

from helion_ls.session.settings import Settings, parse_settings
from helion_ls.workers.machine_tpu import machine_tpu


def test_defaults():
    assert parse_settings(None) == (Settings(), [])
    assert parse_settings({}) == (Settings(), [])
    s = Settings()
    # chip "auto": this machine's TPU generation, v7x where there is none (test_ls_machine_tpu.py)
    assert (s.chip, s.chip_chosen) == (machine_tpu().chip or "v7x", False)
    assert (s.evaluator, s.executor, s.store_path) == ("auto", "local", None)
    assert (s.max_concurrent_tunings, s.compile_on_change, s.debounce_ms, s.libtpu) == (2, False, 500, True)
    assert (s.tune_budget_seconds, s.tune_max_evals) == (60.0, None)


def test_valid_values_are_converted(tmp_path):
    settings, problems = parse_settings(
        {
            "chip": "Ironwood",
            "evaluator": "compile",
            "executor": "ray:10.0.0.1:6379",
            "storePath": "results/store",
            "maxConcurrentTunings": 4,
            "compileOnChange": True,
            "debounceMs": 250,
            "libtpu": False,
            "tuneBudgetSeconds": 5,
            "tuneMaxEvals": 40,
            "interpreter": "/usr/bin/python3",
        },
        base_dir=str(tmp_path),
    )
    assert problems == []
    assert settings == Settings(
        chip="v7x",
        chip_chosen=True,
        evaluator="compile",
        executor="ray:10.0.0.1:6379",
        store_path=os.path.join(str(tmp_path), "results", "store"),
        max_concurrent_tunings=4,
        compile_on_change=True,
        debounce_ms=250,
        libtpu=False,
        tune_budget_seconds=5.0,
        tune_max_evals=40,
    )


def test_store_path_user_and_null():
    assert parse_settings({"storePath": "~/s.db"})[0].store_path == os.path.expanduser("~/s.db")
    assert parse_settings({"storePath": None})[0].store_path is None


def test_invalid_values_replaced_and_reported_each():
    settings, problems = parse_settings(
        {
            "chip": "v99",
            "evaluator": "gpu",
            "executor": "slurm",
            "maxConcurrentTunings": 0,
            "compileOnChange": "yes",
            "debounceMs": 1.5,
            "tuneBudgetSeconds": -1,
            "tuneMaxEvals": "many",
            "compilerCheck": "sometimes",
            "colour": "blue",
        }
    )
    assert settings == Settings()
    assert len(problems) == 10
    joined = "\n".join(problems)
    for fragment in (
        "helion.chip = 'v99' unknown chip",
        "helion.evaluator = 'gpu' must be one of auto, model, compile, schedule, tpu; using the default 'auto'",
        "helion.executor = 'slurm'",
        "helion.maxConcurrentTunings = 0 must be between 1 and 64; using the default 2",
        "helion.compileOnChange = 'yes' must be true or false",
        "helion.debounceMs = 1.5 must be an integer",
        "helion.tuneBudgetSeconds = -1",
        "helion.compilerCheck = 'sometimes' must be one of auto, on, off; using the default 'auto'",
        "helion.tuneMaxEvals = 'many'",
        "unknown setting helion.colour ignored",
    ):
        assert fragment in joined


def test_not_an_object():
    settings, problems = parse_settings(["chip"])
    assert settings == Settings() and problems == [
        "helion settings must be an object, not list; using defaults"
    ]


def test_executors_the_tuner_accepts():
    for good in ("local", "local:3", "inline", "ray", "ray:auto", "ray:10.0.0.1:6379"):
        assert parse_settings({"executor": good}) == (Settings(executor=good), [])
    for bad in ("local:", "local:0", "local:x", "slurm", 3):
        assert parse_settings({"executor": bad})[1], bad
