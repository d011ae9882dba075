"""bench/ls_on_chip.py on a machine without a TPU: the language server started over stdio, its Tune lens run
for examples/softmax.py on v5e, and the Best lens saying what it is (the model's estimate here; on a TPU VM of the
chip, "measured on TPU v5 lite")."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import MACHINE_TPU, REPO, child_pythonpath


def test_the_best_lens_says_whether_the_chip_measured() -> None:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": child_pythonpath()}
    run = subprocess.run([sys.executable, str(REPO / "bench" / "ls_on_chip.py"), "--timeout", "240"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    # on a v5e VM the same run measures on the chip (the bench checks the words either way)
    want = "[measured on TPU v5 lite" if MACHINE_TPU.chip == "v5e" else "[model estimate for v5e]"
    assert want in run.stdout and "ok: the Best lens should say" in run.stdout
