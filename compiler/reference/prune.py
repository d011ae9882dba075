"""The part of a kernel file the eager reference runs: what one kernel needs, not the whole module.

Kept, in their original order and with their original line numbers: the kernel, with its decorators
replaced by a bare `@helion.kernel` (so decorator arguments never run; the reference gets its block sizes
from the caller), or a kernel made by calling the decorator (`name = helion.kernel(other.fn, ...)`) with its
settings dropped the same way; the same-file functions it reads, transitively, without decorators or annotations; and
every module-level statement that binds a name one of those reads (imports, constants, classes), with
whatever those read in turn; a module-level import only with the names read (`from helion._testing import
DEVICE, run_example` keeps DEVICE: the harness function is not the reference's to run). Dropped: all other
top-level code, `if __name__ == "__main__":` blocks, other kernels, classes and functions nobody reads.
Purely static (ast).
"""

from __future__ import annotations

import ast
import copy

HELION_ALIAS = "__hl_reference_helion__"  # the name the kept kernel's bare decorator uses
# what makes a kernel; the same names as the front end's (frontend/module.py), which this may not import
KERNEL_DECORATORS = frozenset({"helion.kernel", "helion.runtime.kernel", "helion.jit", "helion.aot_kernel",
                               "helion.autotuner.aot_kernel", "helion.experimental.aot_kernel"})


def _import_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> dotted module path, for module-level imports."""
    out: dict[str, str] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                out[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.level == 0:
            for alias in stmt.names:
                out[alias.asname or alias.name] = f"{stmt.module}.{alias.name}"
    return out


def _dotted(node: ast.expr, aliases: dict[str, str]) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(aliases.get(node.id, node.id))
    return ".".join(reversed(parts))


def is_kernel(fn: ast.FunctionDef, aliases: dict[str, str]) -> bool:
    return any(
        _dotted(dec.func if isinstance(dec, ast.Call) else dec, aliases) in KERNEL_DECORATORS
        for dec in fn.decorator_list
    )


def _kernel_alias(stmt: ast.stmt, name: str, aliases: dict[str, str]) -> ast.stmt | None:
    """`name = helion.kernel(other.fn, static_shapes=False)` (upstream attention_dynamic: another kernel of the
    same function) as `name = <bare kernel>(other.fn)`, its settings dropped like a decorator's; else None."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target, value = stmt.targets[0], stmt.value
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        target, value = stmt.target, stmt.value
    else:
        return None
    maker = value.func.func if isinstance(value, ast.Call) and isinstance(value.func, ast.Call) else \
        getattr(value, "func", None)  # `helion.kernel(fn, ...)` or `helion.kernel(...)(fn)`
    if not (isinstance(target, ast.Name) and target.id == name and isinstance(value, ast.Call) and value.args
            and maker is not None and _dotted(maker, aliases) in KERNEL_DECORATORS):
        return None
    bare = ast.Call(ast.Attribute(ast.Name(HELION_ALIAS, ast.Load()), "kernel", ast.Load()), [value.args[0]], [])
    return ast.copy_location(ast.Assign([target], ast.copy_location(bare, value)), stmt)


def _branch_of(name: str, body: list[ast.stmt]) -> list[ast.stmt]:
    """`body` with a module-level `if` whose branch defines `name` replaced by that branch's statements (a
    kernel defined only where `_CUDA_ALIKE` is true runs as that branch defines it)."""
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.If):
            for branch in (stmt.body, stmt.orelse):
                if any(isinstance(s, ast.FunctionDef | ast.Assign | ast.AnnAssign) and name in _binds(s)
                       for s in ast.walk(ast.Module(branch, [])) if isinstance(s, ast.stmt)):
                    out.extend(_branch_of(name, branch))
                    break
            else:
                out.append(stmt)
            continue
        out.append(stmt)
    return out


def _is_main_guard(stmt: ast.stmt) -> bool:
    test = stmt.test if isinstance(stmt, ast.If) else None
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def _binds(stmt: ast.stmt) -> set[str]:
    """Names a module-level statement binds (not looking inside the functions and classes it defines)."""
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {stmt.name}
    names: set[str] = set()
    todo: list[ast.AST] = [stmt]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            names.update(_bound_name(a) for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        todo.extend(ast.iter_child_nodes(node))
    return names


def _reads(node: ast.AST) -> set[str]:
    """Names `node` reads from the module; a function's own parameters and locals are not among them."""
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        args = node.args
        local = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a}
        for stmt in node.body:
            local |= _binds(stmt)
        outer = set().union(*(_reads(d) for d in [*args.defaults, *args.kw_defaults, *node.decorator_list] if d))
        names = (names - local) | outer
    return names


def _bound_name(alias: ast.alias) -> str:
    return alias.asname or alias.name.split(".")[0]


def _imports_only(stmt: ast.Import | ast.ImportFrom, needed: set[str]) -> ast.Import | ast.ImportFrom:
    """`stmt` importing only the names in `needed` (at least one of them is)."""
    stmt = copy.copy(stmt)
    stmt.names = [alias for alias in stmt.names if _bound_name(alias) in needed]
    return stmt


def _guarded_imports_only(stmt: ast.If, needed: set[str]) -> ast.If:
    """A module-level `if` with the imports of its branches cut to the names in `needed` (vLLM's `if
    _HELION_AVAILABLE: import helion.language as hl; from ..register import register_kernel`: the decorator is
    not the reference's to run, and its module imports parts of Helion the reference does not model)."""
    def cut(body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for s in body:
            if isinstance(s, ast.Import | ast.ImportFrom) and getattr(s, "module", None) != "__future__":
                if any(_bound_name(a) in needed for a in s.names):
                    out.append(_imports_only(s, needed))
            elif isinstance(s, ast.If):
                out.append(_guarded_imports_only(s, needed))
            else:
                out.append(s)
        return out

    stmt = copy.copy(stmt)
    stmt.body = cut(stmt.body) or [ast.copy_location(ast.Pass(), stmt)]
    stmt.orelse = cut(stmt.orelse)
    return stmt


def _plain_function(fn: ast.FunctionDef, decorator: ast.expr | None) -> ast.FunctionDef:
    """A copy without annotations, and with `decorator` as its only decorator (or none)."""
    fn = copy.deepcopy(fn)
    fn.decorator_list = [decorator] if decorator is not None else []
    fn.returns = None
    args = fn.args
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if arg is not None:
            arg.annotation = None
    return fn


def kernel_module(tree: ast.Module, kernel: str, plain: bool = False) -> ast.Module:
    """The statements of `tree` that running `kernel` needs (see the module docstring); with `plain`, a
    function that is not a kernel (a file's torch `reference`), kept the same way."""
    aliases = _import_aliases(tree)
    body = _branch_of(kernel, [s for s in tree.body if not _is_main_guard(s)])
    # the front end decided `kernel` is one: a function of that name with a decorator (vLLM's register_kernel,
    # a wrapper that applies helion.kernel) counts as well as `@helion.kernel`
    declared = [i for i, s in enumerate(body) if isinstance(s, ast.FunctionDef) and s.name == kernel
                and (plain or is_kernel(s, aliases))]
    wrapped = [i for i, s in enumerate(body) if isinstance(s, ast.FunctionDef) and s.name == kernel
               and s.decorator_list and not plain]
    defs = declared or wrapped
    for i, stmt in enumerate(body):
        alias = None if plain else _kernel_alias(stmt, kernel, aliases)
        if alias is not None:
            body[i] = alias
            defs.append(i)
    if not defs:
        raise KeyError(kernel)
    target = body[max(defs)]
    binders: dict[str, list[int]] = {}
    for i, stmt in enumerate(body):
        for name in _binds(stmt):
            binders.setdefault(name, []).append(i)

    kept: dict[int, ast.stmt] = {}
    todo: list[str] = []

    def keep(i: int) -> None:
        stmt = body[i]
        if i in kept:
            return
        if isinstance(stmt, ast.FunctionDef):
            bare = ast.copy_location(ast.Attribute(ast.Name(HELION_ALIAS, ast.Load()), "kernel", ast.Load()), stmt)
            kernel_here = is_kernel(stmt, aliases) or (i == max(defs) and not plain)
            stmt = _plain_function(stmt, bare if kernel_here else None)
        kept[i] = stmt
        todo.extend(_reads(stmt))

    keep(max(defs))
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name == HELION_ALIAS:
            continue
        seen.add(name)
        for i in binders.get(name, []):
            keep(i)
    for i, stmt in kept.items():
        if isinstance(stmt, ast.Import) or (isinstance(stmt, ast.ImportFrom) and stmt.module != "__future__"):
            kept[i] = _imports_only(stmt, seen)
        elif isinstance(stmt, ast.If):
            kept[i] = _guarded_imports_only(stmt, seen)
    prelude: list[ast.stmt] = [s for s in body if isinstance(s, ast.ImportFrom) and s.module == "__future__"]
    helion = ast.Import([ast.alias("helion", HELION_ALIAS)])
    prelude.append(ast.copy_location(helion, target))
    out = ast.Module([*prelude, *(kept[i] for i in sorted(kept) if kept[i] not in prelude)], type_ignores=[])
    return ast.fix_missing_locations(out)
