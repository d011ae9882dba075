"""helion-ls compiler: Helion kernel source -> typed tile IR -> standalone Pallas TPU module.

The stages are packages, in the order the data goes through them; each imports only those before it
(tests/test_import_direction.py holds this):

  support    diagnostics, the locked parser, child-process lifelines, the shared SQLite file (stdlib only)
  ir         what a compile is about, as data: the tile IR, argument specs, configs, tables, chips, the plan
  frontend   source -> typed tile IR, statically (the user's file is never imported or run)
  codegen    tile IR -> Pallas plan -> standalone module text; the legal block sizes and config space
  vmem       the VMEM report of a plan, its diagnostics, a lower bound per block sizes, configs that fit
  tpu        everything that runs on or asks about a chip: runtime, Mosaic lowering, the libtpu compile
  reference  the eager reference: the original kernel source run with torch (shares no code with the above)

Then what uses them: `api` (`load`, `Module`, `Kernel`: the public face) with `pipeline` (one compile of a
`Kernel` for a shape set + config + chip) and `compiled` (`CompiledKernel`, the result); `check` (run kernels
against the reference), `facts` (what each expression of a kernel became, for hovers), `results` (analysis
results remembered across processes), `tune` (autotuning) and `cli` (`helion-pallas`).

This package never imports `helion_ls`. Heavy modules (jax) load lazily so `compiler.reference` workers stay
light; parsing a file and its kernels' keys import no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .ir.config import Config
from .support import lifeline
from .support.diagnostics import CompileError, Diagnostic, Position, Range, Severity
from .support.syntax import parse as parse_python

lifeline.hold_from_env()  # a process started by one of ours ends with its parent (see support/lifeline.py)

if TYPE_CHECKING:
    from .api import Kernel, Module
    from .compiled import CompiledKernel

__all__ = ["CompileError", "CompiledKernel", "Config", "Diagnostic", "Kernel", "Module", "Position", "Range",
           "Severity", "load", "parse_python", "skip_dynamo_import"]


def load(path_or_source: Any, name: str | None = None, call_shapes: Any = None, where: str | None = None) -> Module:
    """Parse a file or source text statically; see `compiler.api.load`."""
    from .api import load as _load

    return _load(path_or_source, name, call_shapes, where)


def skip_dynamo_import() -> int:
    """For processes that compile but never run torch.compile: the first compile then does not import
    torch._dynamo (1-2 s); see `compiler.frontend.dynamo_free`."""
    from .frontend.dynamo_free import skip_dynamo_import as _skip

    return _skip()


def __getattr__(name: str) -> Any:
    if name == "CompiledKernel":
        from .compiled import CompiledKernel

        return CompiledKernel
    if name in ("Kernel", "Module"):
        from . import api

        return getattr(api, name)
    raise AttributeError(name)
