"""bench/ls_on_chip.py on a machine without a TPU: the language server started over stdio, its Tune lens run
for examples/softmax.py on v5e, and the Best lens saying what it is (the model's estimate here; on a TPU VM of the
chip, "measured on TPU v5 lite")."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO


def test_the_best_lens_of_a_tuning_without_a_tpu_is_the_model_s_estimate() -> None:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, str(REPO / "bench" / "ls_on_chip.py"), "--timeout", "240"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    assert "[model estimate for v5e]" in run.stdout and "ok: the Best lens should say" in run.stdout
