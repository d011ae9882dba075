"""Remembered analysis results: what compiling and checking a kernel found, kept across processes.

`UnitKey` names one unit of analysis (a kernel's normalised source with its helpers and constants, one
shape set, the config, the chip, the file name generated code carries); every stored record is also keyed
by `environment()` (this compiler's sources, Python, torch, jax and libtpu versions), so a result is only
ever reused by the code that would compute it again. `StageRecord` is one stage's result for a unit
(front end + codegen + VMEM, Mosaic lowering, libtpu compile): its diagnostics, the kernel text their
ranges are in, and for the front stage a `CompiledSnapshot` (generated module, source map, plan, VMEM
report: what hovers and the generated-code view show). `AnalysisCache` keeps them in SQLite beside the
tuning store, bounded in size (least recently used go first), shared by the CLI and every editor, which
compile a kernel's units alike (`kernel_units`, `compile_unit`).

Nothing here imports torch: the language server reads remembered results before torch is loaded.
"""

from __future__ import annotations

from .cache import AnalysisCache, default_cache_path
from .keys import UnitKey, environment
from .records import STAGES, CompiledSnapshot, StageRecord
from .units import Unit, compile_unit, front_record, kernel_text, kernel_units

__all__ = ["STAGES", "AnalysisCache", "CompiledSnapshot", "StageRecord", "Unit", "UnitKey", "compile_unit",
           "default_cache_path", "environment", "front_record", "kernel_text", "kernel_units"]
