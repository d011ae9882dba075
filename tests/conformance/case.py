"""One conformance case: a kernel file under `kernels/`, read statically by the compiler and executed with a
stub `helion` (nothing Helion runs) for its plain-torch `reference`, its `inputs` and its markers.

A case file holds one `@helion.kernel` and, at module level:
- `reference(*args)`: plain torch; takes the kernel's arguments and returns what the kernel returns (it
  mutates its arguments the way an in-place kernel does);
- `inputs()` (optional): the arguments, when random ones will not do (indices, offsets); otherwise the first
  `# helion: args(...)` line gives random inputs;
- `CONFIGS` (optional): configs to run (default: the decorator's `config=`, else the compiler's default);
- `REJECT` (instead of `reference`): a regex that one of the compiler's diagnostics must match;
- `check(result, *args)` (instead of `reference`, for random results): returns None or what is wrong;
- `TOLERANCE`, `POSITIVE` (argument names drawn positive);
- `KNOWN_MISMATCH` / `KNOWN_CRASH`: a committed compiler bug (a silent wrong answer / a crash of compiled
  code), still run, counted and reported; the text says what goes wrong.
"""

from __future__ import annotations

import ast
import builtins
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import compiler
from compiler.reference import make_inputs

KERNELS_DIR = Path(__file__).resolve().parent / "kernels"
PASSING = Path(__file__).resolve().parent / "PASSING.txt"  # kernels that passed every run when recorded


class CaseError(Exception):
    """A case file that cannot be used (no kernel, no reference, no inputs): a bug in the suite."""


@dataclass
class Case:
    path: Path
    name: str
    kernel: compiler.Kernel
    summary: str
    reference: Callable[..., Any] | None
    check: Callable[..., str | None] | None
    make_args: Callable[[], list[Any]]
    configs: list[dict[str, Any]]
    reject: str | None
    tolerance: dict[str, float] | None
    known_mismatch: str | None
    known_crash: str | None


def discover(pattern: str | None = None, directory: Path = KERNELS_DIR) -> list[Path]:
    """Case files, sorted; `pattern` keeps those whose name contains it."""
    files = sorted(p for p in directory.glob("*.py") if not p.name.startswith("_"))
    return [p for p in files if pattern is None or pattern in p.stem]


def passing() -> set[str]:
    """The recorded floor: kernels that must keep passing."""
    if not PASSING.exists():
        return set()
    return {line.strip() for line in PASSING.read_text().splitlines() if line.strip() and not line.startswith("#")}


def write_passing(names: Iterable[str]) -> None:
    header = "# Conformance kernels that passed every config and loop strategy when recorded; CI keeps them\n" \
             "# passing. Regenerate with `python -m tests.conformance --write-passing`.\n"
    PASSING.write_text(header + "".join(f"{n}\n" for n in sorted(names)))


def load_case(path: Path) -> Case:
    source = path.read_text()
    module = compiler.load(path)
    namespace = _exec_with_stub_helion(source, path)
    kernels = list(module.kernels.values())
    wanted = namespace.get("KERNEL")
    if wanted:
        kernels = [k for k in kernels if k.name == wanted]
    if len(kernels) != 1:
        raise CaseError(f"{path.name}: expected one @helion.kernel (or KERNEL = name), found {len(kernels)}")
    kernel = kernels[0]
    reference = namespace.get("reference")
    check = namespace.get("check")
    reject = namespace.get("REJECT")
    if reference is None and reject is None and check is None:
        raise CaseError(f"{path.name}: defines none of `reference`, `check`, `REJECT`")
    return Case(
        path=path,
        name=path.stem,
        kernel=kernel,
        summary=_summary(source),
        reference=reference,
        check=check,
        make_args=_arg_maker(path, kernel, namespace),
        configs=_configs(kernel, namespace),
        reject=reject,
        tolerance=namespace.get("TOLERANCE"),
        known_mismatch=namespace.get("KNOWN_MISMATCH"),
        known_crash=namespace.get("KNOWN_CRASH"),
    )


def _arg_maker(path: Path, kernel: compiler.Kernel, namespace: dict[str, Any]) -> Callable[[], list[Any]]:
    explicit = namespace.get("inputs")
    if explicit is not None:
        return lambda: list(explicit())
    if not kernel.shape_sets:
        raise CaseError(f"{path.name}: no `inputs()` and no '# helion: args(...)' line")
    specs = kernel.shape_sets[0]
    positive = tuple(namespace.get("POSITIVE", ()))
    return lambda: make_inputs(specs, seed=0, positive=positive)


def _configs(kernel: compiler.Kernel, namespace: dict[str, Any]) -> list[dict[str, Any]]:
    given = namespace.get("CONFIGS")
    if given is not None:
        return [dict(c or {}) for c in given]
    return [dict(kernel.decorator_config or {})]


def _summary(source: str) -> str:
    doc = ast.get_docstring(ast.parse(source)) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


# -- a `helion` that does nothing: the case file's kernel is only ever read by the compiler ---------------

class _Anything:
    """Any helion attribute used at module level (annotations such as `hl.constexpr`)."""

    def __getattr__(self, name: str) -> _Anything:
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> _Anything:
        return self

    def __getitem__(self, key: Any) -> _Anything:
        return self


def _kernel_decorator(*args: Any, **kwargs: Any) -> Any:
    def mark(fn: Any) -> Any:
        fn.fn = fn  # `helion.kernel(other.fn, ...)` makes another kernel of the same function
        return fn

    if args and callable(args[0]):
        return mark(args[0])
    return mark


def _stub_module(name: str, **attrs: Any) -> types.ModuleType:
    mod = types.ModuleType(name)
    anything = _Anything()
    mod.__getattr__ = lambda attr: anything  # PEP 562: every other attribute is inert
    for key, value in attrs.items():
        setattr(mod, key, value)
    return mod


def _exec_with_stub_helion(source: str, path: Path) -> dict[str, Any]:
    language = _stub_module("helion.language")
    helion = _stub_module("helion", kernel=_kernel_decorator, Config=dict, language=language,
                          cdiv=lambda a, b: -(-a // b))
    real_import = builtins.__import__

    def importer(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        if level == 0 and name.split(".")[0] == "helion":
            if not fromlist:
                return helion
            return language if name == "helion.language" else helion
        return real_import(name, globals, locals, fromlist, level)

    namespace: dict[str, Any] = {
        "__name__": f"conformance_{path.stem}",
        "__file__": str(path),
        "__builtins__": {**builtins.__dict__, "__import__": importer},
    }
    exec(compile(source, str(path), "exec"), namespace)  # noqa: S102 - the suite's own case files
    return namespace
