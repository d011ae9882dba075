"""What a fresh correctness-gate worker runs first (see evaluators.verify), while the tuning process imports
torch and searches. Standard library only at import: the tuning command pickles `warm_up` before it imports
torch itself, so that both processes import theirs at once.
"""

from __future__ import annotations


def warm_up() -> None:
    """Run first in a fresh gate worker while the tuning process imports torch and searches: import torch
    and the gate, start the eager-reference process — a fork of this one, which has torch and has run
    nothing yet, so it imports nothing — then import jax and Pallas' TPU interpret mode, so the first check
    pays only its own work."""
    import gc

    gc.disable()  # torch's and jax's imports: collections scanning their objects would only slow them down
    from .correctness import reference_process

    reference_process().start(fork=True)
    import jax  # noqa: F401
    from jax.experimental.pallas import tpu  # noqa: F401

    gc.freeze()
    gc.enable()
