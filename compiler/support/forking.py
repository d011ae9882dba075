"""Whether a fork of this process makes a sound worker that has torch without importing it. Standard
library only (the tuner's executors import it before torch)."""

from __future__ import annotations

import os
import sys
import threading


def forks_with_torch() -> bool:
    """torch is imported (else a fork saves nothing), jax is not (its threads do not survive a fork), no
    other Python thread may hold a lock meanwhile, and this system can fork."""
    return ("torch" in sys.modules and "jax" not in sys.modules and threading.active_count() == 1
            and hasattr(os, "fork"))
