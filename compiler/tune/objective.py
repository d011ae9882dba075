"""What tuning ranks configs by, and when a better config is worth writing into a kernel.

Speed, with the rules our hints state: an *estimate* for a config that needs more than the chip's default
scoped VMEM (HPL301: the generated code raises `vmem_limit_bytes`, taking VMEM other kernels of the program
may want) ranks as if it were VMEM_MARGIN slower, so the model picks it only when it expects it to be at least
that much faster than every config within the default limit: near the limit the model's VMEM account and time
are least sure (attention [256, 64, 128]: 117 MiB reported, 134 MiB to the compiler). A time measured on the
chip ranks as it is: the chip compiled the kernel with the limit it asks for, and the margin would make the tpu
evaluator pick a config it measured slower (attention 8k on v5e: 100.7 ms within the limit over 97.6 ms
above it). A stored best is offered for *Apply* only when it gains at least
APPLY_GAIN over the config the kernel runs with now. The store (`TuningStore.top`) orders trials by the same
objective, in SQL.

An estimate has a resolution: below it the model's order is little better than a coin toss. Over the v5e
sweeps (bench/chip/v5e_sweep_*.json, 4,545 pairs of configs of one kernel; `bench/tune_vs_chip.py` prints it),
where the model put two configs less than 3 % apart the chip ordered them its way in 403 of 674 pairs (60 %);
3-5 % apart in 82 %, 5-10 % in 75 %, over 10 % in 97 %. So between two of the model's estimates for a chip whose
resolution was measured (ModelConstants.resolution, carried in the estimate's metrics) the better must promise
that much to replace the config the kernel runs with now — in tuning's pick and for *Apply* (APPLY_GAIN at
least). Attention 8k on the v5e: the model's best was 1.6-2.0 % faster than the default by its estimate and
7-10 % slower on the chip. Where the resolution was not measured (every chip but the v5e) tuning picks the
model's best as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

VMEM_MARGIN = 0.05  # an over-the-default-limit config must be >= 5 % faster than the best within it
APPLY_GAIN = 0.02  # Apply is offered for a gain of >= 2 % (by the objective) over the current config
OVER_DEFAULT = "over_default_limit"  # the VMEM report's verdict (metrics["vmem_verdict"])


def over_default(metrics: Mapping[str, Any] | None) -> bool:
    """Does this trial's config need more than the default scoped VMEM?"""
    return bool(metrics) and metrics.get("vmem_verdict") == OVER_DEFAULT


def margined(metrics: Mapping[str, Any] | None) -> bool:
    """Does the margin apply: an estimate (not a time measured on a chip) for a config over the default limit?"""
    return over_default(metrics) and metrics.get("estimate") is not False


def objective(seconds: float, metrics: Mapping[str, Any] | None) -> float:
    """Seconds, with the over-the-default-VMEM margin added to an estimate."""
    return seconds * (1 + VMEM_MARGIN) if margined(metrics) else seconds


def resolution(best: Mapping[str, Any] | None, current: Mapping[str, Any] | None) -> float:
    """The least gap at which the model orders these two trials better than chance on their chip: its measured
    resolution when both are the model's estimates, else 0 (a measured time, a chip not measured)."""
    def of(metrics: Mapping[str, Any] | None) -> float:
        return float(metrics.get("resolution", 0.0)) if metrics and metrics.get("estimate") is not False else 0.0

    return min(of(best), of(current))


def least_gain(best: Mapping[str, Any] | None, current: Mapping[str, Any] | None) -> float:
    """The gain `best` must promise over `current` to be offered for Apply."""
    return max(APPLY_GAIN, resolution(best, current))


def worth_applying(best: float, current: float, least: float = APPLY_GAIN) -> bool:
    """Is going from `current` to `best` (objective values) a gain of at least `least`?"""
    return current >= best * (1 + least)


# `objective` in SQLite, on the trials table's `seconds` and `metrics` (JSON) columns
OBJECTIVE_SQL = (
    f"seconds * (CASE WHEN json_extract(metrics, '$.vmem_verdict') = '{OVER_DEFAULT}' "
    f"AND coalesce(json_extract(metrics, '$.estimate'), 1) != 0 THEN {1 + VMEM_MARGIN!r} ELSE 1.0 END)"
)
