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
3-5 % apart in 82 %, 5-10 % in 75 %, over 10 % in 97 %. So an estimate must promise MODEL_RESOLUTION over the
config the kernel runs with now to replace it — in tuning's pick and for *Apply* — and a measured time
APPLY_GAIN. Attention 8k on the v5e: the model's best was 1.6-2.0 % faster than the default by its estimate and
7-10 % slower on the chip.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

VMEM_MARGIN = 0.05  # an over-the-default-limit config must be >= 5 % faster than the best within it
APPLY_GAIN = 0.02  # Apply is offered for a gain of >= 2 % (by the objective) over the current config
MODEL_RESOLUTION = 0.03  # ... and >= 3 % between estimates: the least gap the model orders better than chance
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


def least_gain(estimated: bool) -> float:
    """The gain a better config must promise over the current one: the model's resolution between estimates."""
    return max(APPLY_GAIN, MODEL_RESOLUTION) if estimated else APPLY_GAIN


def worth_applying(best: float, current: float, estimated: bool = False) -> bool:
    """Is going from `current` to `best` (objective values; `estimated`: both are estimates) a gain of at least
    `least_gain`?"""
    return current >= best * (1 + least_gain(estimated))


# `objective` in SQLite, on the trials table's `seconds` and `metrics` (JSON) columns
OBJECTIVE_SQL = (
    f"seconds * (CASE WHEN json_extract(metrics, '$.vmem_verdict') = '{OVER_DEFAULT}' "
    f"AND coalesce(json_extract(metrics, '$.estimate'), 1) != 0 THEN {1 + VMEM_MARGIN!r} ELSE 1.0 END)"
)
