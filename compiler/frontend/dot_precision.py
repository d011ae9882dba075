"""How precisely a kernel's f32 dots are computed: Helion's `dot_precision` setting, made true on a TPU.

A TPU's MXU multiplies bf16. Mosaic (Pallas on TPU) offers two precisions for an f32 dot: the default, one
bf16 pass (about 3 significant digits: errors up to 0.16 against torch's f32 at upstream's test shapes on a
v5e), and `Precision.HIGHEST`, six passes. `Precision.HIGH` (XLA's bf16x3) is refused by Mosaic.
Upstream Helion's Pallas backend lowers every setting to the default; here each setting gets at least the
precision its name promises:

  "tf32" (Helion's default)   three bf16 passes written out (`_dot_bf16x3`: hi*hi + hi*lo + lo*hi, f32
                              sums): ~16 significant bits, more than tf32's 11, ~2.2x the default's time
  "tf32x3", "ieee"            Precision.HIGHEST: f32 to within rounding, ~5x the default's time

Dots of bf16, 8-bit or integer operands are exact products already and run at the default; float16 operands,
carried as float32 (Mosaic has no float16 vectors) and wider than one bf16 pass, are planned as f32 ones. The setting
comes from the decorator (`@helion.kernel(dot_precision="ieee")`), else HELION_DOT_PRECISION, else "tf32".
Each dot op of the IR carries its plan in `kwargs["precision"]`: codegen spells it, the model costs it.
Interpret mode on a CPU computes the written-out passes exactly as the chip does, and HIGHEST as f32, so a CPU
verdict on a dot's values holds on the chip.
"""

from __future__ import annotations

import ast
import os

import torch

from ..ir.tile_ir import KernelIR, Op, walk
from ..support.diagnostics import Range, UserError

SETTINGS = ("tf32", "tf32x3", "ieee")
DEFAULT_SETTING = "tf32"
ENV = "HELION_DOT_PRECISION"

# the plan of an f32 dot under each setting; dots of narrower operands are "default"
_F32_PLAN = {"tf32": "bf16x3", "tf32x3": "highest", "ieee": "highest"}
# bf16 MXU passes a product costs. HIGHEST is six passes by its definition, but on a TPU v5e (2026-12-06,
# bench/dot_precision.py, f32 4096^3) it took 5.52 ms, 7.9 times a bf16 pass at the chip's peak (0.70 ms);
# the three written-out passes took 2.79 ms, the rest of it the vector work of splitting (op_work counts that).
PASSES = {"default": 1, "bf16x3": 3, "highest": 8}


def setting(decorator: ast.expr) -> str:
    """The kernel's dot_precision: the decorator's keyword, else the environment's, else "tf32". A value that
    is not one of SETTINGS raises UserError (HPL109) on the keyword."""
    for kw in decorator.keywords if isinstance(decorator, ast.Call) else ():
        if kw.arg == "dot_precision":
            value = kw.value.value if isinstance(kw.value, ast.Constant) else None
            if value not in SETTINGS:
                raise UserError("HPL109", f"dot_precision must be one of {', '.join(map(repr, SETTINGS))}",
                                Range.of(kw.value))
            return value
    value = os.environ.get(ENV, DEFAULT_SETTING)
    if value not in SETTINGS:
        raise UserError("HPL109", f"{ENV}={value!r}: must be one of {', '.join(SETTINGS)}", Range.of(decorator))
    return value


def plan(a: torch.dtype, b: torch.dtype, chosen: str) -> str:
    """"default", "bf16x3" or "highest" for a dot of `a` and `b` operands under the setting `chosen`."""
    if {a, b} & {torch.float32, torch.float64, torch.float16}:  # float16 is carried as float32 (codegen/work.py)
        return _F32_PLAN[chosen]
    return "default"


def stamp(ir: KernelIR, chosen: str) -> None:
    """Give every dot op of `ir` its plan (the IR's dots are traced without one)."""
    for node in walk(ir.host):
        if isinstance(node, Op) and node.kind == "dot":
            node.kwargs["precision"] = plan(node.args[0].dtype, node.args[1].dtype, chosen)
