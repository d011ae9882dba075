"""What the correctness gate's process runs first (see zygote.py), while the tuning process imports torch
and searches. Standard library only at import: the tuning command hands over `warm_up` before it imports
torch itself, so that both processes import theirs at once.
"""

from __future__ import annotations


def warm_up() -> None:
    """Import everything a check runs — torch, the gate, the eager reference's runner, jax and Pallas' TPU
    interpret mode — so that a check forked from this process pays only its own work. Nothing runs: no
    torch computation, no jax backend, so a fork of this process (a check, and its eager-reference process
    in turn) stays sound."""
    import gc

    gc.disable()  # torch's and jax's imports: collections scanning their objects would only slow them down
    import jax  # noqa: F401
    from jax.experimental.pallas import tpu  # noqa: F401
    from jaxlib.mlir.dialects import builtin, mhlo  # noqa: F401 - what a check's first lowering imports (~25-50 ms)

    from ..reference import runner  # noqa: F401 - what the eager-reference process (a fork of a check) runs
    from . import correctness  # noqa: F401

    gc.freeze()
    gc.enable()
