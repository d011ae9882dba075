"""The eager `helion` package as seen by exec'd kernel source, and the `__import__` that serves it.

`import helion`, `import helion.language as hl`, `from helion import kernel, language`, ... resolve to
module objects made per exec'd source, never registered in `sys.modules`; other imports are untouched.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from types import ModuleType
from typing import Any

from compiler.ir.config import Config
from compiler.reference.autotuner import FRAGMENTS
from compiler.reference.kernel import EagerKernel, Runtime
from compiler.reference.language import language_module
from compiler.reference.tiles import cdiv, next_power_of_2
from compiler.reference.upstream_testing import testing_module
from compiler.reference.workspace import WorkspaceImports

_PUBLIC = ("kernel", "jit", "aot_kernel", "Config", "cdiv", "next_power_of_2", "language", "autotuner",
           "experimental", "_testing")


def _kernel_decorator(runtime: Runtime) -> Callable[..., Any]:
    def kernel(fn: Callable[..., Any] | None = None, **settings: Any) -> Any:
        """`@helion.kernel`, `@helion.kernel()` and `@helion.kernel(config=..., static_shapes=...)`; also
        `@helion.aot_kernel(...)`, whose own keys (key=, batched=, collect_fn=, measure_fn=) only steer which
        config upstream picks per shape, never what the kernel computes."""
        if fn is not None:
            return EagerKernel(fn, runtime, settings)
        return lambda f: EagerKernel(f, runtime, settings)

    return kernel


def _missing(name: str) -> Any:
    raise AttributeError(
        f"helion.{name} is not available in the eager reference (supported: {', '.join(_PUBLIC)})"
    )


def helion_modules(runtime: Runtime) -> dict[str, ModuleType]:
    """{"helion": ..., "helion.language": ..., "helion.autotuner": ..., ...} for one exec'd source."""
    kernel = _kernel_decorator(runtime)
    language = language_module(runtime)
    autotuner = ModuleType("helion.autotuner", "Eager helion.autotuner: register_tunable's fragments, aot_kernel.")
    for name, cls in FRAGMENTS.items():
        setattr(autotuner, name, cls)
    autotuner.aot_kernel = kernel
    experimental = ModuleType("helion.experimental", "Eager helion.experimental: aot_kernel's former home.")
    experimental.aot_kernel = kernel
    testing = testing_module()
    helion = ModuleType("helion", "Eager helion over torch (compiler.reference).")
    helion.kernel = helion.jit = helion.aot_kernel = kernel
    helion.Config = Config
    helion.cdiv = cdiv
    helion.next_power_of_2 = next_power_of_2
    helion.language = language
    helion.autotuner = autotuner
    helion.experimental = experimental
    helion._testing = testing
    utils = ModuleType("helion._utils", "Eager helion._utils: upstream's integer helpers.")
    utils.cdiv, utils.next_power_of_2 = cdiv, next_power_of_2
    helion._utils = utils
    helion.__path__ = []  # a package, so `import helion.language` is well formed
    helion.__getattr__ = _missing  # type: ignore[method-assign]
    return {"helion": helion, "helion.language": language, "helion.autotuner": autotuner,
            "helion.experimental": experimental, "helion._testing": testing, "helion._utils": utils}


def builtins_with_helion(modules: dict[str, ModuleType]) -> dict[str, Any]:
    """A copy of the builtins whose `__import__` answers helion imports from `modules`."""
    real_import = builtins.__import__
    workspace = WorkspaceImports()

    def import_(
        name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
    ) -> Any:
        if level == 0 and (name == "helion" or name.startswith("helion.")):
            if name not in modules:
                raise ModuleNotFoundError(f"No module named {name!r} in the eager reference", name=name)
            return modules[name] if fromlist else modules["helion"]
        found = workspace.find(name, globals, fromlist, level, namespace)
        if found is not None:
            return found
        return real_import(name, globals, locals, fromlist, level)

    namespace = dict(builtins.__dict__)
    namespace["__import__"] = import_
    return namespace
