"""TPU-truth checks for a generated Pallas module, without a TPU.

What lives here:
  mesh.py            `tpu_abstract_mesh(chip)`: make the CPU look like a chosen TPU to jax/Pallas.
  lowering.py        `lower_check`: Pallas -> Mosaic lowering for the TPU platform (jaxlib only, in-process),
                     and `mosaic_text`: the readable Mosaic MLIR of each kernel in an export.
  libtpu_compile.py  `tpu_compile`: the real TPU compiler (libtpu, deviceless) in a worker subprocess;
                     classified errors, VMEM figures and op counts of the final Mosaic pass; with
                     `TpuCompiler(schedule=...)` also the compiler's own schedule of each kernel.
  llo_dump.py        parsing of libtpu's LLO dumps: scheduled bundles, loops and trip counts, slot
                     utilisation, simulated cycles.
  mosaic_dump.py     parsing of libtpu's Mosaic pass dumps (kernel text, op counts).
  mlir_text.py       small text helpers shared by the above (error trimming, MLIR locations).
  _libtpu_worker.py  the worker process body (never imported by the parent).

Submodules load lazily: `from compiler.checks import libtpu_available` does not import jax.
May import: jax, jaxlib (and libtpu only inside the worker process), the standard library,
`compiler.chips`. Never imports the rest of `compiler` nor `helion_ls`.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "KernelDump": "mosaic_dump",
    "LibtpuUnavailable": "libtpu_compile",
    "LoweringHints": "lowering",
    "LoweringResult": "lowering",
    "SourceLoc": "mlir_text",
    "TpuCompileResult": "libtpu_compile",
    "TpuCompiler": "libtpu_compile",
    "VmemAllocation": "libtpu_compile",
    "libtpu_available": "libtpu_compile",
    "lower_check": "lowering",
    "mosaic_text": "lowering",
    "tpu_abstract_mesh": "mesh",
    "tpu_compile": "libtpu_compile",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(name)
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
