"""The eager `helion` package as seen by exec'd kernel source, and the `__import__` that serves it.

`import helion`, `import helion.language as hl`, `from helion import kernel, language`, ... resolve to
module objects made per exec'd source, never registered in `sys.modules`; other imports are untouched.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from types import ModuleType
from typing import Any

from compiler.config import Config
from compiler.reference.autotuner import FRAGMENTS
from compiler.reference.kernel import EagerKernel, Runtime
from compiler.reference.language import language_module
from compiler.reference.tiles import cdiv, next_power_of_2

_PUBLIC = ("kernel", "Config", "cdiv", "next_power_of_2", "language", "autotuner")


def _kernel_decorator(runtime: Runtime) -> Callable[..., Any]:
    def kernel(fn: Callable[..., Any] | None = None, **settings: Any) -> Any:
        """`@helion.kernel`, `@helion.kernel()` and `@helion.kernel(config=..., static_shapes=...)`."""
        if fn is not None:
            return EagerKernel(fn, runtime, settings)
        return lambda f: EagerKernel(f, runtime, settings)

    return kernel


def _missing(name: str) -> Any:
    raise AttributeError(
        f"helion.{name} is not available in the eager reference (supported: {', '.join(_PUBLIC)})"
    )


def helion_modules(runtime: Runtime) -> dict[str, ModuleType]:
    """{"helion": ..., "helion.language": ..., "helion.autotuner": ...} for one exec'd source."""
    language = language_module(runtime)
    autotuner = ModuleType("helion.autotuner", "Eager helion.autotuner: register_tunable's fragments.")
    for name, cls in FRAGMENTS.items():
        setattr(autotuner, name, cls)
    helion = ModuleType("helion", "Eager helion over torch (compiler.reference).")
    helion.kernel = _kernel_decorator(runtime)
    helion.Config = Config
    helion.cdiv = cdiv
    helion.next_power_of_2 = next_power_of_2
    helion.language = language
    helion.autotuner = autotuner
    helion.__path__ = []  # a package, so `import helion.language` is well formed
    helion.__getattr__ = _missing  # type: ignore[method-assign]
    return {"helion": helion, "helion.language": language, "helion.autotuner": autotuner}


def builtins_with_helion(modules: dict[str, ModuleType]) -> dict[str, Any]:
    """A copy of the builtins whose `__import__` answers helion imports from `modules`."""
    real_import = builtins.__import__

    def import_(
        name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
    ) -> Any:
        if level == 0 and (name == "helion" or name.startswith("helion.")):
            if name not in modules:
                raise ModuleNotFoundError(f"No module named {name!r} in the eager reference", name=name)
            return modules[name] if fromlist else modules["helion"]
        return real_import(name, globals, locals, fromlist, level)

    namespace = dict(builtins.__dict__)
    namespace["__import__"] = import_
    return namespace
