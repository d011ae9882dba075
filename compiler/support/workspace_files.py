"""Other files of the workspace a kernel file imports names from, found and sliced statically (stdlib only).

vLLM's kernel files call small helpers of their own package (`from vllm.kernels.helion.utils import
get_fp8_dtype`, `from ..utils import get_int8_min_max`). Such a helper's source is a file next to the
kernel's package: for `from a.b.c import f` the first ancestor directory of the kernel file holding
`a/b/c.py` (or `a/b/c/__init__.py`); for `from ..c import f` the file relative to the kernel file's
package. Nothing is imported or run here: the file is read and parsed, and `needed` gives the top-level
statements that bind the imported names and what those read, transitively, in file order (imports, with
only the names read; assignments; functions; classes). The front end evaluates those statements
(frontend/workspace_imports.py), the eager reference executes them (reference/workspace.py).

Only files under a directory above the kernel file are followed, never installed libraries or the
standard library: names from `torch`, `helion`, `triton`, `jax`, `numpy` are never looked for.
`followed_files` is the list of files such a read depends on, for the keys of remembered results.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass

from .syntax import parse

NEVER_FOLLOWED = frozenset({"torch", "helion", "triton", "jax", "jaxlib", "numpy", "math", "typing", "functools",
                            "itertools", "os", "sys", "dataclasses", "collections", "enum", "abc", "re", "regex"})
MAX_ANCESTORS = 16  # directories above the kernel file searched for an absolute import's package
MAX_FILES = 32  # files followed from one kernel file, transitively
MAX_BYTES = 2_000_000  # a bigger file is not read


@dataclass(frozen=True)
class Parsed:
    """A followed file: its path, its top-level statements and, per local name, the module it imports from."""

    path: str
    tree: ast.Module
    imports: dict[str, tuple[str | None, int, str]]  # local name -> (module, level, imported name)


_CACHE: dict[str, tuple[tuple[int, int], Parsed | None]] = {}


def locate(origin: str | None, module: str | None, level: int) -> str | None:
    """The source file of `module` as imported from the file `origin` (`level` dots for a relative import),
    when it is a workspace file; else None."""
    if not origin:
        return None
    parts = module.split(".") if module else []
    if level == 0:
        if not parts or parts[0] in NEVER_FOLLOWED:
            return None
        directory = os.path.dirname(os.path.abspath(origin))
        for _ in range(MAX_ANCESTORS):
            found = _module_file(directory, parts)
            if found is not None:
                return found
            parent = os.path.dirname(directory)
            if parent == directory:
                return None
            directory = parent
        return None
    directory = os.path.dirname(os.path.abspath(origin))
    for _ in range(level - 1):
        directory = os.path.dirname(directory)
    return _module_file(directory, parts) if parts else _module_file(directory, [], package=True)


def _module_file(directory: str, parts: list[str], package: bool = False) -> str | None:
    base = os.path.join(directory, *parts)
    for candidate in ((os.path.join(base, "__init__.py"),) if package else (base + ".py",
                                                                             os.path.join(base, "__init__.py"))):
        if os.path.isfile(candidate):
            return candidate
    return None


def read(path: str) -> Parsed | None:
    """`path` parsed (cached while its size and modification time stay), or None if it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    stamp = (st.st_mtime_ns, st.st_size)
    hit = _CACHE.get(path)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    parsed = None
    if st.st_size <= MAX_BYTES:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                tree = parse(f.read(), path)
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            tree = None
        if isinstance(tree, ast.Module):
            parsed = Parsed(path, tree, _imports(tree))
    _CACHE[path] = (stamp, parsed)
    return parsed


def _imports(tree: ast.Module) -> dict[str, tuple[str | None, int, str]]:
    out: dict[str, tuple[str | None, int, str]] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                if alias.name != "*":
                    out[alias.asname or alias.name] = (stmt.module, stmt.level, alias.name)
    return out


def imported_from(origin: str | None, tree: ast.Module) -> dict[str, tuple[str, str]]:
    """Local name -> (workspace file, name there) for each `from M import name` of `tree`'s top level whose
    module `M` is a workspace file (see `locate`)."""
    out: dict[str, tuple[str, str]] = {}
    for local, (module, level, name) in _imports(tree).items():
        path = locate(origin, module, level)
        if path is not None and os.path.abspath(path) != os.path.abspath(origin or ""):
            out[local] = (path, name)
    return out


def needed(parsed: Parsed, names: set[str]) -> list[ast.stmt]:
    """The top-level statements of `parsed` that bind `names`, and those binding what they read, transitively,
    in file order; an import statement keeps only the names read."""
    binders: dict[str, list[int]] = {}
    for i, stmt in enumerate(parsed.tree.body):
        for name in _bound(stmt):
            binders.setdefault(name, []).append(i)
    keep: set[int] = set()
    wanted: set[str] = set()
    todo = sorted(names)
    while todo:
        name = todo.pop()
        if name in wanted:
            continue
        wanted.add(name)
        for i in binders.get(name, ()):
            if i in keep:
                continue
            keep.add(i)
            stmt = parsed.tree.body[i]
            if not isinstance(stmt, ast.Import | ast.ImportFrom):
                todo.extend(n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and n.id not in wanted)
    out: list[ast.stmt] = []
    for i in sorted(keep):
        stmt = parsed.tree.body[i]
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            aliases = [a for a in stmt.names if (a.asname or a.name.split(".")[0]) in wanted]
            stmt = ast.copy_location(type(stmt)(**{**{f: getattr(stmt, f) for f in stmt._fields}, "names": aliases}),
                                     stmt)
        out.append(stmt)
    return out


def _bound(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [stmt.name]
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return [a.asname or a.name.split(".")[0] for a in stmt.names if a.name != "*"]
    if isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return []


def followed_files(origin: str | None, tree: ast.Module | None, names: set[str] | None = None) -> tuple[str, ...]:
    """Every workspace file the names `tree` imports (all of them, or only `names`) are read from,
    transitively through what those files import in turn, sorted: what an analysis of `tree` depends on
    besides its own text."""
    if tree is None or not origin:
        return ()
    seen: dict[str, None] = {}
    done: set[tuple[str, str]] = set()
    todo: list[tuple[str | None, ast.Module, set[str] | None]] = [(origin, tree, names)]
    while todo and len(seen) < MAX_FILES:
        here, module_tree, wanted = todo.pop()
        for local, (path, name) in imported_from(here, module_tree).items():
            if (wanted is not None and local not in wanted) or (path, name) in done:
                continue
            done.add((path, name))
            parsed = read(path)
            if parsed is None:
                continue
            seen[path] = None
            stmts = needed(parsed, {name})
            reads = {n.id for s in stmts for n in ast.walk(s) if isinstance(n, ast.Name)} | {name}
            todo.append((path, ast.Module(stmts, []), reads))
    return tuple(sorted(seen))
