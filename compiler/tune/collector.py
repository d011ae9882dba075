"""The cyclic garbage collector held off while a search or a check runs.

Why: a search traces and plans hundreds of configs and a check traces a kernel through jax; both make
objects by the hundred thousand, so the collector runs again and again over them (8% of a search of
attention's configs, ~5% of a check). What they leave is freed by reference counting as it goes (a
search's whole cyclic garbage is ~12 MB); the rest is collected once the collector is back on.
Standard library only.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """No automatic collections meanwhile (the process's setting is restored after, even if nested)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
