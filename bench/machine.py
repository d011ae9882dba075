"""The yardstick of the speed figures: this machine's bare `python -c "import torch"`, timed in the same
run as the figure (no benchmarks here; the bench scripts import it).

Seconds do not transfer between machines, a multiple of the torch import on the same machine at the same
load mostly does. Every timed figure is printed as seconds and as that multiple, with the 1-minute load
average.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time


def torch_import_seconds(runs: int = 3) -> float:
    """Median wall seconds of a bare `python -c "import torch"` (a fresh interpreter each time)."""
    walls = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch"], check=True)
        walls.append(time.perf_counter() - start)
    return statistics.median(walls)


def load_average() -> float:
    return os.getloadavg()[0]


def figure(seconds: float, torch_import: float) -> str:
    """`1.23 s (0.95× torch import)`."""
    return f"{seconds:.3f} s ({seconds / torch_import:.2f}× torch import)"


def yardstick_line(torch_import: float) -> str:
    return (f"bare `python -c \"import torch\"` on this machine: {torch_import:.3f} s (median of 3), "
            f"load average {load_average():.2f}")
