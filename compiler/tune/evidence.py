"""What a tuned figure is, in the words the editor and the command line show beside it: a measurement on a
named machine, or an estimate for a named chip — never a bare evaluator name, so a model figure is not read
as the chip's. Light (chip facts only): the language server labels lenses with it."""

from __future__ import annotations

from ..ir.chips import CHIP_NAMES, get_chip


def evidence(evaluator: str, chip: str) -> str:
    """`measured on TPU v5 lite` (the tpu evaluator runs only on the chip it tunes for: evaluators.py checks
    jax's device kind), `model estimate for v7x`, or the TPU compiler's estimate."""
    if evaluator == "tpu":
        kind = get_chip(chip).device_kind if chip in CHIP_NAMES else f"TPU {chip}"
        return f"measured on {kind}"
    if evaluator == "schedule":
        return f"TPU compiler's estimate for {chip}"
    if evaluator == "compile":
        return f"model estimate for {chip}, vector work counted by libtpu"
    return f"model estimate for {chip}"
