"""helion-ls compiler: Helion kernel source -> typed tile IR -> standalone Pallas TPU module.

Data flows one way: frontend (parse, host evaluation, device loops) -> ir -> codegen (plan, emit) ->
checks (VMEM, lowering, libtpu) -> runtime / reference -> tune. `api` and `cli` are the public face;
`pipeline` compiles a `Kernel` for one shape set + config + chip into a `compiled.CompiledKernel`.
This package never imports `helion_ls`. Heavy modules (jax) load lazily so `compiler.reference`
workers stay light; parsing a file and its kernels' keys import no torch. `results` keeps analysis
results across processes (in a `sqlite_file`, as `tune.store` keeps tuning results). `syntax.parse` is
the one (locked) way to parse Python; `lifeline` makes child processes end with their parent, and
`forking` says when a fork of this process makes a worker that skips torch's import;
`callables` turns Python functions given as kernel arguments into specs (their source) and back;
`table_roles` reads off the IR which integer arguments are offsets, positions or loop counts (`tables`, the
plain data a check draws them from).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import lifeline
from .config import Config
from .diagnostics import CompileError, Diagnostic, Position, Range, Severity
from .syntax import parse as parse_python

lifeline.hold_from_env()  # a process started by one of ours ends with its parent (see lifeline.py)

if TYPE_CHECKING:
    from .api import Kernel, Module
    from .compiled import CompiledKernel

__all__ = ["CompileError", "CompiledKernel", "Config", "Diagnostic", "Kernel", "Module", "Position", "Range",
           "Severity", "load", "parse_python", "skip_dynamo_import"]


def load(path_or_source: Any, name: str | None = None, call_shapes: Any = None) -> Module:
    """Parse a file or source text statically; see `compiler.api.load`."""
    from .api import load as _load

    return _load(path_or_source, name, call_shapes)


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
