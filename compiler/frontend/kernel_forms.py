"""How a file declares a kernel besides `@helion.kernel`: a decorator or call that applies `helion.kernel` for
it (a wrapper), with its settings in `helion.Settings(...)`, its shapes in an input generator and its
reference in `autotune_baseline_fn`. Purely static: nothing of the user's or a library's is imported or run.

A wrapper is recognised (`Wrappers.applies_kernel`) when it is
  - vLLM's `register_kernel` (by its import path, so one op file opened alone is understood: vLLM applies
    `helion.kernel(**settings)` to the function when the op is first used),
  - named in the nearest pyproject.toml above the file: `[tool.helion-ls] kernel-wrappers = ["pkg.mod.fn"]`,
  - or a function whose source is in the workspace (a package root above the file) or installed (sys.path)
    and whose code reaches a `helion.kernel(...)` application: its own body, the same module's functions
    and classes it names, transitively (read with ast, never imported).

vLLM's declaration: `@register_kernel(op_name, *, config_picker=, fake_impl=, mutates_args=,
helion_settings=helion.Settings(...), input_generator=fn)`, or bare `@register_kernel` with the generator
registered by `@kernel.register_input_generator`. `helion.Settings(...)` keywords are taken as if given to
`helion.kernel`; GPU-only ones (backend="cute"/"triton") are dropped with a note.
"""

from __future__ import annotations

import ast
import os
import sys
from dataclasses import dataclass, field
from functools import lru_cache

from ..support.diagnostics import Diagnostic, Range, hint

HELION_KERNEL = frozenset({"helion.kernel", "helion.runtime.kernel", "helion.jit", "helion.aot_kernel",
                           "helion.autotuner.aot_kernel", "helion.experimental.aot_kernel"})
SETTINGS = frozenset({"helion.Settings", "helion.runtime.settings.Settings"})
# vLLM's register_kernel: its current home and the older one (a compatibility alias of it), and their packages
VLLM_WRAPPERS = frozenset({
    "vllm.backends.compute.kernels.helion.register.register_kernel",
    "vllm.backends.compute.kernels.helion.register_kernel",
    "vllm.kernels.helion.register.register_kernel",
    "vllm.kernels.helion.register_kernel",
})
GENERATOR_KEYWORDS = ("input_generator",)
VLLM_KEYWORDS = frozenset({"op_name", "config_picker", "fake_impl", "mutates_args", "helion_settings",
                           "input_generator"})
REGISTER_GENERATOR = "register_input_generator"  # `@kernel.register_input_generator` (vLLM's older form)
BASELINE_SETTING = "autotune_baseline_fn"
GPU_BACKENDS = frozenset({"cute", "triton", "tileir"})


@dataclass
class Declaration:
    """A kernel declared through a wrapper: `settings` is the `helion.kernel(...)` call it amounts to (at the
    wrapper's place in the file), `wrapper` the wrapper's qualified name."""

    settings: ast.Call
    wrapper: str
    input_generator: str | None = None
    baseline: str | None = None
    notes: list[Diagnostic] = field(default_factory=list)


class Wrappers:
    """Which qualified names apply `helion.kernel` to the function they decorate, for the file at `where`
    (None: a text with no file; only the names known without one)."""

    def __init__(self, where: str | None):
        self.where = os.path.abspath(where) if where else None
        self.configured = frozenset(_configured(os.path.dirname(self.where))) if self.where else frozenset()
        self._seen: dict[str, bool] = {}

    def applies_kernel(self, qualname: str | None) -> bool:
        if not qualname:
            return False
        if qualname in VLLM_WRAPPERS or qualname in self.configured:
            return True
        if qualname.startswith("helion.") or qualname.startswith("torch.") or "." not in qualname:
            return False
        if qualname not in self._seen:
            self._seen[qualname] = _reads_as_wrapper(qualname, self._roots())
        return self._seen[qualname]

    def _roots(self) -> tuple[str, ...]:
        """Directories a module path is looked up under: each one above the file (the workspace's package
        roots), then the installed ones."""
        out: list[str] = []
        if self.where:
            d = os.path.dirname(self.where)
            for _ in range(12):
                out.append(d)
                parent = os.path.dirname(d)
                if parent == d:
                    break
                d = parent
        out += [p for p in sys.path if p and os.path.isdir(p)]
        return tuple(dict.fromkeys(out))


def declaration(dec: ast.expr, qualname: str | None, wrappers: Wrappers, named: dict[str, ast.expr]
                ) -> Declaration | None:
    """The kernel `dec` (a decorator of a function) declares through a wrapper, else None. `named`: the
    module-level assignments so far (`helion_settings=SETTINGS`)."""
    if not wrappers.applies_kernel(qualname):
        return None
    assert qualname is not None
    call = dec if isinstance(dec, ast.Call) else None
    keywords: list[ast.keyword] = []
    notes: list[Diagnostic] = []
    generator = baseline = None
    for kw in call.keywords if call is not None else ():
        value = _named(kw.value, named)
        if kw.arg in GENERATOR_KEYWORDS and isinstance(value, ast.Name):
            generator = value.id
        elif kw.arg == "helion_settings" and isinstance(value, ast.Call) and _settings_call(value, named):
            for skw in value.keywords:
                if skw.arg == BASELINE_SETTING and isinstance(skw.value, ast.Name):
                    baseline = skw.value.id
                if skw.arg == "backend" and isinstance(skw.value, ast.Constant) and skw.value.value in GPU_BACKENDS:
                    notes.append(hint(
                        "HPL115", f"backend={skw.value.value!r} is a GPU backend of Helion; on a TPU this kernel is "
                                  "compiled for Pallas (the setting is ignored here)", Range.of(skw)))
                    continue
                if skw.arg is not None:
                    keywords.append(skw)
        elif kw.arg is not None and kw.arg not in VLLM_KEYWORDS and qualname not in VLLM_WRAPPERS:
            keywords.append(kw)  # another wrapper's own keywords are helion.kernel's (`@my_kernel(config=...)`)
    settings = ast.Call(ast.Attribute(ast.Name("helion", ast.Load()), "kernel", ast.Load()), [], keywords)
    ast.copy_location(settings, dec)
    settings.end_lineno, settings.end_col_offset = dec.end_lineno, dec.end_col_offset
    ast.copy_location(settings.func, dec)
    ast.copy_location(settings.func.value, dec)
    return Declaration(settings, qualname, generator, baseline, notes)


def _settings_call(call: ast.Call, named: dict[str, ast.expr]) -> bool:
    func = call.func
    text = ast.unparse(func)
    return text.endswith("Settings")


def _named(node: ast.expr, named: dict[str, ast.expr]) -> ast.expr:
    for _ in range(8):
        if not (isinstance(node, ast.Name) and node.id in named):
            break
        node = named[node.id]
    return node


def registered_generators(tree_body: list[ast.stmt]) -> dict[str, str]:
    """Kernel name -> generator function, from `@kernel.register_input_generator` on a module-level def."""
    out: dict[str, str] = {}
    for stmt in tree_body:
        if isinstance(stmt, ast.FunctionDef):
            for dec in stmt.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                if isinstance(target, ast.Attribute) and target.attr == REGISTER_GENERATOR \
                        and isinstance(target.value, ast.Name):
                    out[target.value.id] = stmt.name
    return out


# -- the project's configuration --------------------------------------------------------------------------

def _configured(directory: str) -> list[str]:
    """`[tool.helion-ls] kernel-wrappers` of the nearest pyproject.toml at or above `directory`."""
    d = directory
    for _ in range(32):
        candidate = os.path.join(d, "pyproject.toml")
        if os.path.isfile(candidate):
            return list(_wrappers_in(candidate, _mtime(candidate)))
        parent = os.path.dirname(d)
        if parent == d:
            return []
        d = parent
    return []


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


@lru_cache(maxsize=64)
def _wrappers_in(path: str, _mtime: float) -> tuple[str, ...]:
    import tomllib

    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, ValueError):
        return ()
    names = data.get("tool", {}).get("helion-ls", {}).get("kernel-wrappers", [])
    return tuple(n for n in names if isinstance(n, str)) if isinstance(names, list) else ()


# -- reading a wrapper's source ---------------------------------------------------------------------------

def _reads_as_wrapper(qualname: str, roots: tuple[str, ...]) -> bool:
    """Does the function `qualname` (pkg.mod.fn), found as source under `roots`, reach `helion.kernel(...)`?
    An `__init__.py` that imports the name from a submodule is followed (two hops at most)."""
    for _ in range(3):
        module, _, name = qualname.rpartition(".")
        path = _source_of(module, roots)
        if path is None:
            return False
        tree = _parsed(path, _mtime(path))
        if tree is None:
            return False
        found = _reaches_kernel(tree, name)
        if found is not None:
            return found
        imported = _imported_as(tree, name, module, path.endswith("__init__.py"))
        if imported is None:
            return False
        qualname = imported
    return False


def _source_of(module: str, roots: tuple[str, ...]) -> str | None:
    rel = module.replace(".", os.sep)
    for root in roots:
        for candidate in (os.path.join(root, rel + ".py"), os.path.join(root, rel, "__init__.py")):
            if os.path.isfile(candidate):
                return candidate
    return None


@lru_cache(maxsize=64)
def _parsed(path: str, _mtime: float) -> ast.Module | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        if len(text) > 2_000_000:
            return None
        return ast.parse(text)
    except (OSError, SyntaxError, ValueError, RecursionError):
        return None


def _imported_as(tree: ast.Module, name: str, module: str, is_package: bool) -> str | None:
    """Where `from X import name` in the module `module` takes `name` from (relative imports resolved)."""
    package = module if is_package else module.rpartition(".")[0]
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                if (alias.asname or alias.name) == name:
                    base = stmt.module or ""
                    if stmt.level:
                        parts = package.split(".")
                        parent = ".".join(parts[: len(parts) - stmt.level + 1])
                        base = f"{parent}.{base}" if base else parent
                    return f"{base}.{alias.name}"
    return None


def _reaches_kernel(tree: ast.Module, name: str) -> bool | None:
    """True when the module-level function or class `name` reaches a `helion.kernel(...)` application through
    the module's own functions and classes it names; None when the module does not define `name`."""
    imports: dict[str, str] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                imports[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else \
                    alias.name.split(".")[0]
        elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
            for alias in stmt.names:
                imports[alias.asname or alias.name] = f"{stmt.module}.{alias.name}"
    defs: dict[str, ast.AST] = {}
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defs.setdefault(stmt.name, stmt)
    if name not in {s.name for s in tree.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}:
        return None
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        if current in seen or current not in defs:
            continue
        seen.add(current)
        node = defs[current]
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and _applies_helion_kernel(sub, imports):
                return True
            if isinstance(sub, ast.Name) and sub.id in defs:
                todo.append(sub.id)
            elif isinstance(sub, ast.Attribute) and sub.attr in defs:
                todo.append(sub.attr)
    return False


def _applies_helion_kernel(call: ast.Call, imports: dict[str, str]) -> bool:
    """`helion.kernel(...)(fn)` or `helion.kernel(fn, ...)`."""
    func = call.func.func if isinstance(call.func, ast.Call) else call.func
    return _dotted(func, imports) in HELION_KERNEL and (isinstance(call.func, ast.Call) or bool(call.args))


def _dotted(node: ast.expr, imports: dict[str, str]) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(imports.get(node.id, node.id))
    return ".".join(reversed(parts))
