"""TPU-truth checks for a generated Pallas module, without a TPU.

What lives here:
  mesh.py            `tpu_abstract_mesh(chip)`: make the CPU look like a chosen TPU to jax/Pallas.
  lowering.py        `lower_check`: Pallas -> Mosaic lowering for the TPU platform (jaxlib only, in-process),
                     and `mosaic_text`: the readable Mosaic MLIR of each kernel in an export.
  libtpu_compile.py  `tpu_compile`: the real TPU compiler (libtpu, deviceless) in a worker subprocess;
                     classified errors, VMEM figures and op counts of the final Mosaic pass.
  mosaic_dump.py     parsing of libtpu's Mosaic pass dumps (kernel text, op counts).
  mlir_text.py       small text helpers shared by the above (error trimming, MLIR locations).
  _libtpu_worker.py  the worker process body (never imported by the parent).

May import: jax, jaxlib (and libtpu only inside the worker process), the standard library,
`compiler.chips`. Never imports the rest of `compiler` nor `helion_ls`.
"""

from .libtpu_compile import (
    LibtpuUnavailable,
    TpuCompiler,
    TpuCompileResult,
    VmemAllocation,
    libtpu_available,
    tpu_compile,
)
from .lowering import LoweringHints, LoweringResult, lower_check, mosaic_text
from .mesh import tpu_abstract_mesh
from .mlir_text import SourceLoc
from .mosaic_dump import KernelDump

__all__ = [
    "KernelDump",
    "LibtpuUnavailable",
    "LoweringHints",
    "LoweringResult",
    "SourceLoc",
    "TpuCompileResult",
    "TpuCompiler",
    "VmemAllocation",
    "libtpu_available",
    "lower_check",
    "mosaic_text",
    "tpu_abstract_mesh",
    "tpu_compile",
]
