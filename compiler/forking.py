"""Whether a fork of this process makes a sound worker that has torch without importing it. Standard
library only (the tuner's executors import it before torch)."""

from __future__ import annotations

import os
import sys
import threading


def forks_with_torch() -> bool:
    """torch is imported (else a fork saves nothing), jax has started no backend (its threads do not survive
    a fork; importing jax starts none), no other Python thread may hold a lock meanwhile, and this system
    can fork."""
    return ("torch" in sys.modules and not jax_started() and threading.active_count() == 1
            and hasattr(os, "fork"))


def jax_started() -> bool:
    """jax has started a backend in this process (and with it XLA's threads), or cannot tell."""
    if "jax" not in sys.modules:
        return False
    bridge = sys.modules.get("jax._src.xla_bridge")
    return bridge is None or bool(getattr(bridge, "_backends", True))
