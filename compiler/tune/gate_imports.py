"""Importing this module is its whole job: the gate's fork server (gate_pool.py) imports it once, before it
forks any worker, so that every worker starts with torch, jax, Pallas' TPU interpret mode and the gate
loaded.

The collector is off during the imports (scanning torch's and jax's objects meanwhile would only slow them
down) and what they made is frozen after, so that no collection in a worker scans it and a fork's pages
stay shared. jax's backend is not initialised here: its threads would not survive the fork.
"""

from __future__ import annotations

import gc

gc.disable()
try:
    import jax  # noqa: F401
    from jax.experimental.pallas import tpu  # noqa: F401

    from ..runtime import skip_gpu_interpreter
    from . import correctness, evaluators  # noqa: F401

    skip_gpu_interpreter()
finally:
    gc.freeze()
    gc.enable()
