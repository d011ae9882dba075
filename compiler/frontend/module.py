"""Static view of a Python file: imports, helper functions, constants, and the Helion kernels in it."""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..ir.callables import with_file_names
from ..ir.config import Config, ConfigError, config_from_call
from ..ir.specs import ArgSpec, CallableSpec, SpecError, parse_args_text
from ..support import workspace_files
from ..support.diagnostics import Diagnostic, Position, Range, error, hint
from ..support.syntax import error_range, parse
from .kernel_forms import Declaration, Wrappers, declaration, registered_generators

ARGS_LINE = re.compile(r"^(\s*)#\s*helion:\s*args\((.*)\)\s*$")
ARGS_PREFIX = re.compile(r"^\s*#\s*helion:\s*args\b")


@dataclass
class KernelDef:
    """A `@helion.kernel` function as written, before any tracing."""

    name: str
    node: ast.FunctionDef
    decorator: ast.expr
    decorator_config: Config | None
    decorator_configs: list[Config]
    shape_sets: list[dict[str, ArgSpec]]
    shape_set_ranges: list[Range]
    diagnostics: list[Diagnostic]
    config_range: Range | None = None  # the `config=` value
    configs_ranges: list[Range] = field(default_factory=list)  # each `configs=[...]` entry
    declared_by: str | None = None  # a wrapper that applies helion.kernel (vLLM's register_kernel), if not itself
    condition: str | None = None  # defined only under a module-level `if`: "`cond` is true" / "... is false"
    input_generator: str | None = None  # the module function whose dict of case keys gives its shape sets
    baseline: str | None = None  # `helion.Settings(autotune_baseline_fn=NAME)`: the file's reference for it


@dataclass
class ModuleInfo:
    source: str
    tree: ast.Module | None
    imports: dict[str, str] = field(default_factory=dict)  # local name -> qualified name
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    constants: dict[str, Any] = field(default_factory=dict)  # literal ones (ast.literal_eval)
    definitions: dict[str, list[ast.stmt]] = field(default_factory=dict)  # top-level statements assigning a name
    evaluated_constants: dict[str | None, dict[str, Any]] = field(default_factory=dict)  # per chip (module_constants.py)
    path: str | None = None  # the file, when known: where names imported from other workspace files are looked for
    links: dict[str | None, Any] = field(default_factory=dict, repr=False)  # per chip (workspace_imports.py)
    followed: tuple[str, ...] | None = None  # the workspace files read for its imports (workspace_imports.py)
    kernels: list[KernelDef] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    _shared: tuple[str, frozenset[str]] | None = field(default=None, repr=False)  # see _module_part


def parse_module(source: str, where: str | None = None) -> ModuleInfo:
    """Parse `source`; syntax errors become one diagnostic and no kernels. `where`: the file's path, for the
    wrappers its project names or its workspace defines (kernel_forms.py); None for a text without one."""
    try:
        tree = parse(source)
    except SyntaxError as exc:
        return ModuleInfo(source, None, diagnostics=[error("HPL100", f"syntax error: {exc.msg}", error_range(exc))])
    except (ValueError, RecursionError, MemoryError) as exc:
        return ModuleInfo(source, None, diagnostics=[error("HPL100", f"cannot parse file: {exc}", Range.lines(0))])
    info = ModuleInfo(source, tree, path=where)
    lines = source.splitlines()
    for stmt in tree.body:
        collect_imports(stmt, info.imports)
    wrappers = Wrappers(where)
    assigned: dict[str, ast.expr] = {}  # module-level `NAME = ...` so far (a decorator's `config=NAME`)
    for stmt, condition in _module_statements(tree.body, None, 0):
        _collect_definitions(stmt, info.definitions)
        if isinstance(stmt, ast.FunctionDef):
            if condition is None or stmt.name not in info.functions:  # a branch's def does not hide the plain one
                info.functions[stmt.name] = stmt
            dec, declared = _kernel_decorator(stmt, info.imports, wrappers, assigned)
            if dec is not None:
                kernel = _kernel_def(stmt, declared.settings if declared else dec, lines, assigned)
                _declared(kernel, declared, condition)
                info.kernels.append(kernel)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            alias = _kernel_alias(stmt.target.id, stmt.value, info)  # `attention_dynamic: object = ...`
            if alias is not None:
                kernel = _kernel_def(alias, _alias_settings(stmt.value), lines, assigned)
                _declared(kernel, None, condition)
                info.kernels.append(kernel)
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            alias = _kernel_alias(stmt.targets[0].id, stmt.value, info)
            if alias is not None:
                kernel = _kernel_def(alias, _alias_settings(stmt.value), lines, assigned)
                _declared(kernel, None, condition)
                info.kernels.append(kernel)
                continue
            if condition:
                continue  # a conditional binding is no constant
            assigned[stmt.targets[0].id] = stmt.value
            try:
                info.constants[stmt.targets[0].id] = ast.literal_eval(stmt.value)
            except (ValueError, TypeError, SyntaxError, RecursionError):
                pass
    generators = registered_generators(tree.body)
    for kernel in info.kernels:
        if kernel.input_generator is None and kernel.name in generators:
            kernel.input_generator = generators[kernel.name]
        _with_file_names(kernel, info)
    return info


def _module_statements(body: list[ast.stmt], condition: str | None, depth: int
                       ) -> Iterator[tuple[ast.stmt, str | None]]:
    """The module's statements in order, with those of its module-level `if` blocks (not the `__main__` guard)
    and what each branch needs ("`_CUDA_ALIKE` is true"): kernels defined only on one branch are still the
    file's kernels."""
    for stmt in body:
        yield stmt, condition
        if isinstance(stmt, ast.If) and depth < 3 and not _is_main_guard(stmt):
            test = _shorten(ast.unparse(stmt.test))
            yield from _module_statements(stmt.body, _and(condition, f"`{test}` is true"), depth + 1)
            yield from _module_statements(stmt.orelse, _and(condition, f"`{test}` is false"), depth + 1)


def _and(outer: str | None, inner: str) -> str:
    return inner if outer is None else f"{outer} and {inner}"


def _shorten(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_main_guard(stmt: ast.If) -> bool:
    test = stmt.test
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators))


def _declared(kernel: KernelDef, declared: Declaration | None, condition: str | None) -> None:
    kernel.condition = condition
    if condition is not None:
        node = kernel.node
        start = Position(node.lineno - 1, node.col_offset)
        kernel.diagnostics.append(hint(
            "HPL116", f"`{kernel.name}` is defined only where {condition} (a module-level `if`); it is analysed as "
                      "that branch defines it", Range(start, Position(start.line, start.character + 3))))
    if declared is not None:
        kernel.declared_by = declared.wrapper
        kernel.input_generator = declared.input_generator
        kernel.baseline = declared.baseline
        kernel.diagnostics.extend(declared.notes)


def _alias_settings(value: ast.expr) -> ast.expr:
    """The `helion.kernel(...)` call of `name = helion.kernel(...)(fn)`: its settings, like a decorator's."""
    return value.func if isinstance(value, ast.Call) and isinstance(value.func, ast.Call) else value


def followed_files(info: ModuleInfo) -> tuple[str, ...]:
    """The other workspace files `info`'s imports are read from, transitively (support/workspace_files.py;
    ast only, no torch), kept on `info`."""
    if info.followed is None:
        info.followed = workspace_files.followed_files(info.path, info.tree)
    return info.followed


def _with_file_names(kernel: KernelDef, info: ModuleInfo) -> None:
    """A shape line's lambdas read the file's imports and module-level number constants."""
    for specs in kernel.shape_sets:
        for name, spec in specs.items():
            if isinstance(spec, CallableSpec):
                specs[name] = with_file_names(spec, info.imports, info.constants)


def _kernel_alias(name: str, value: ast.expr, info: ModuleInfo) -> ast.FunctionDef | None:
    """`name = helion.kernel(other.fn, ...)` (or `helion.kernel(fn, ...)`): another kernel of the same function
    with its own settings (upstream's attention_dynamic). The function, renamed; None for anything else."""
    if not (isinstance(value, ast.Call) and value.args):
        return None
    maker = value.func.func if isinstance(value.func, ast.Call) else value.func  # helion.kernel(...)(fn) too
    if qualified_name(maker, info.imports) not in KERNEL_DECORATORS:
        return None
    if isinstance(value.func, ast.Call) and value.func.args:
        return None  # helion.kernel(fn)(x) is a call of a kernel, not a kernel
    target = value.args[0]
    if isinstance(target, ast.Attribute) and target.attr == "fn":
        target = target.value
    fn = info.functions.get(target.id) if isinstance(target, ast.Name) else None
    if fn is None:
        return None
    renamed = copy.copy(fn)
    renamed.name = name
    return renamed


def _collect_definitions(stmt: ast.stmt, table: dict[str, list[ast.stmt]]) -> None:
    """The top-level assignments binding each name (what a kernel reading the name depends on)."""
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, ast.AnnAssign | ast.AugAssign):
        targets = [stmt.target]
    else:
        return
    for target in targets:
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                table.setdefault(node.id, []).append(stmt)


def collect_imports(stmt: ast.stmt, table: dict[str, str]) -> None:
    if isinstance(stmt, ast.Import):
        for alias in stmt.names:
            if alias.asname:
                table[alias.asname] = alias.name
            else:
                root = alias.name.split(".")[0]
                table[root] = root
    elif isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.level == 0:
        for alias in stmt.names:
            table[alias.asname or alias.name] = f"{stmt.module}.{alias.name}"
    elif isinstance(stmt, ast.If | ast.Try):
        for sub in ast.iter_child_nodes(stmt):
            if isinstance(sub, ast.stmt):
                collect_imports(sub, table)


def qualified_name(node: ast.expr, imports: dict[str, str]) -> str | None:
    """`hl.tile` -> 'helion.language.tile' through the file's import aliases."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in imports:
        return None
    parts.append(imports[node.id])
    return ".".join(reversed(parts))


# `aot_kernel` is `kernel` plus ahead-of-time tuning keys (key=, batched=, collect_fn=): the same kernel here;
# upstream defines it in helion.autotuner and re-exports it (helion.experimental: its deprecated old home);
# `jit` is upstream's alias of `kernel`. The eager reference recognises the same names (reference/prune.py).
KERNEL_DECORATORS = frozenset({"helion.kernel", "helion.runtime.kernel", "helion.jit", "helion.aot_kernel",
                               "helion.autotuner.aot_kernel", "helion.experimental.aot_kernel"})


def _kernel_decorator(fn: ast.FunctionDef, imports: dict[str, str], wrappers: Wrappers | None = None,
                      assigned: dict[str, ast.expr] | None = None) -> tuple[ast.expr | None, Declaration | None]:
    """The decorator that makes `fn` a kernel: `@helion.kernel(...)` (no declaration), or a wrapper that applies
    helion.kernel (with what it declares); (None, None) for a plain function."""
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = qualified_name(target, imports)
        if name in KERNEL_DECORATORS:
            return dec, None
        declared = declaration(dec, name, wrappers, assigned or {}) if wrappers is not None else None
        if declared is not None:
            return dec, declared
    return None, None


def _kernel_def(fn: ast.FunctionDef, dec: ast.expr, lines: list[str], assigned: dict[str, ast.expr]) -> KernelDef:
    diags: list[Diagnostic] = []
    config = None
    configs: list[Config] = []
    config_range, configs_ranges = None, []

    def named(node: ast.expr) -> ast.expr:
        """A module-level name given as a config (`config=HSTU_CONFIG`): the expression assigned to it."""
        for _ in range(8):
            if not (isinstance(node, ast.Name) and node.id in assigned):
                break
            node = assigned[node.id]
        return node

    if isinstance(dec, ast.Call):
        for kw in dec.keywords:
            try:
                value = named(kw.value)
                if kw.arg == "config":
                    config = config_from_call(value)
                    config_range = Range.of(kw.value)
                elif kw.arg == "configs" and isinstance(value, ast.List | ast.Tuple):
                    configs = [config_from_call(named(e)) for e in value.elts]
                    configs_ranges = [Range.of(e) for e in value.elts]
            except ConfigError as exc:
                diags.append(error("HPL109", str(exc), Range.of(kw.value)))
    shape_sets, ranges = [], []
    first = min([fn.lineno] + [d.lineno for d in fn.decorator_list]) - 1  # zero-based line of first decorator
    line_no = first - 1
    block: list[int] = []
    while line_no >= 0 and lines[line_no].lstrip().startswith("#"):
        block.append(line_no)
        line_no -= 1
    for ln in reversed(block):
        text = lines[ln]
        if not ARGS_PREFIX.match(text):
            continue
        m = ARGS_LINE.match(text)
        rng = Range(Position(ln, len(text) - len(text.lstrip())), Position(ln, len(text.rstrip())))
        if not m:
            diags.append(error("HPL104", "expected '# helion: args(name=dtype[d0, d1, ...], ...)'", rng))
            continue
        inner_start = text.index("args(") + 5
        try:
            specs = parse_args_text(m.group(2))
        except SpecError as exc:
            if exc.col is not None:
                start = inner_start + max(0, exc.col)
                end = inner_start + exc.end_col if exc.end_col is not None else start + 1
                rng = Range(Position(ln, start), Position(ln, max(end, start + 1)))
            diags.append(error("HPL104", f"bad shape line: {exc}", rng))
            continue
        shape_sets.append(specs)
        ranges.append(rng)
    return KernelDef(fn.name, fn, dec, config, configs, shape_sets, ranges, diags, config_range, configs_ranges)


def used_helpers(fn: ast.FunctionDef, functions: dict[str, ast.FunctionDef]) -> list[ast.FunctionDef]:
    """Same-file functions a kernel calls (transitively), so their edits invalidate its results."""
    seen: dict[str, ast.FunctionDef] = {}
    todo = [fn]
    while todo:
        cur = todo.pop()
        for node in ast.walk(cur):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                name = node.func.id
                if name in functions and name not in seen and functions[name] is not fn:
                    seen[name] = functions[name]
                    todo.append(functions[name])
    return [seen[k] for k in sorted(seen)]


CONFIG_KEYWORDS = frozenset({"config", "configs"})  # tuning output in a decorator, not kernel semantics


def normal_dump(node: ast.AST) -> str:
    """`ast.dump` of `node` without docstrings and without the decorators' config=/configs= keywords (no
    positions): everything else is semantics. A decorator call left with no arguments is the bare decorator:
    `@helion.kernel`, `@helion.kernel()` and `@helion.kernel(config=...)` are the same kernel (Apply turns the
    first into the last). The tree is changed in place for the dump and restored (far cheaper than a copy for
    a file of hundreds of kernels); a module is parsed and hashed by one thread."""
    undo: list[tuple[ast.AST, str, Any]] = []
    try:
        for n in ast.walk(node):
            if not isinstance(n, ast.FunctionDef):
                continue
            body = n.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(
                    body[0].value.value, str):
                undo.append((n, "body", body))
                n.body = body[1:] or [ast.Pass()]
            decorators = []
            for deco in n.decorator_list:
                if isinstance(deco, ast.Call):
                    undo.append((deco, "keywords", deco.keywords))
                    deco.keywords = [kw for kw in deco.keywords if kw.arg not in CONFIG_KEYWORDS]
                    if not deco.args and not deco.keywords:
                        deco = deco.func
                decorators.append(deco)
            undo.append((n, "decorator_list", n.decorator_list))
            n.decorator_list = decorators
        return ast.dump(node, annotate_fields=False, include_attributes=False)
    finally:
        for obj, name, value in reversed(undo):
            setattr(obj, name, value)


def normalized_hash(nodes: list[ast.stmt], constants: dict[str, Any],
                    definitions: dict[str, list[ast.stmt]] | None = None) -> str:
    """Hash of code, not text: whitespace, comments, docstrings, order of the functions and an applied
    `config=` do not change it (so applying a tuned config keeps its stored results). The values of the literal
    module constants the code reads are in it, and so is the code of the other module-level assignments it
    reads (`_FP8_MAX = float(torch.finfo(_FP8_DTYPE).max)`), with those they read in turn."""
    dumps = sorted(normal_dump(node) for node in nodes)
    h = hashlib.sha256()
    for dump in dumps:
        h.update(dump.encode())
        h.update(b"\0")
    names = {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name)}
    for name in sorted(names & constants.keys()):
        h.update(f"{name}={constants[name]!r}".encode())
    for stmt in _definitions_read(names - constants.keys(), definitions or {}):
        h.update(normal_dump(stmt).encode())
        h.update(b"\0")
    return h.hexdigest()[:20]


def _definitions_read(names: set[str], definitions: dict[str, list[ast.stmt]]) -> list[ast.stmt]:
    """The module-level assignments of `names`, and of the names those read, transitively, in file order."""
    seen: dict[int, ast.stmt] = {}
    todo = sorted(names & definitions.keys())
    done = set(todo)
    while todo:
        for stmt in definitions[todo.pop()]:
            if id(stmt) in seen:
                continue
            seen[id(stmt)] = stmt
            for n in ast.walk(stmt):
                if isinstance(n, ast.Name) and n.id in definitions and n.id not in done:
                    done.add(n.id)
                    todo.append(n.id)
    return sorted(seen.values(), key=lambda s: (s.lineno, s.col_offset))


def source_hash(fn: ast.FunctionDef, helpers: list[ast.FunctionDef], constants: dict[str, Any],
                definitions: dict[str, list[ast.stmt]] | None = None) -> str:
    """The kernel's identity for stored tuning results (see `normalized_hash`)."""
    return normalized_hash([fn, *helpers], constants, definitions)


def analysis_hash(fn: ast.FunctionDef, info: ModuleInfo, shape_lines: str = "") -> str:
    """Everything of its file a kernel's analysis may read, hashed: the kernel; every top-level statement
    that is not a function or class definition (every import, wherever it sits, every constant and module-level
    block) except an `if __name__ == "__main__":` block; every function and class those and the kernel name,
    transitively (helpers, combine functions given as values, functions a constant is computed by);
    `shape_lines` (the kernel's shape-line comments); and the workspace files its imports are read from. Functions and
    classes nothing names (other kernels, tests, `main`) are left out, so editing one kernel keeps the others'
    results. Comments, whitespace, docstrings and the decorator's `config=` are not in it (the unit's key holds
    its config). This is deliberately wider than `source_hash` (the tuning identity): a remembered analysis
    must be exactly what a fresh one would say."""
    if info.tree is None:
        return hashlib.sha256(info.source.encode()).hexdigest()[:20]
    try:
        shared, names = _module_part(info)
        defined = _top_level_definitions(info.tree)
        chosen: dict[int, ast.stmt] = {}
        todo = sorted({*names, *_loaded_names(fn)})
        done = set(todo)
        while todo:
            for stmt in defined.get(todo.pop(), ()):
                if stmt is fn or id(stmt) in chosen:
                    continue
                chosen[id(stmt)] = stmt
                for name in _loaded_names(stmt) - done:
                    done.add(name)
                    todo.append(name)
        h = hashlib.sha256(shared.encode())
        for dump in [normal_dump(fn), *sorted(normal_dump(s) for s in chosen.values())]:
            h.update(b"\0" + dump.encode())
    except RecursionError:  # too deep to walk (it gets a diagnostic): the whole file's text instead
        h = hashlib.sha256(info.source.encode())
    h.update(b"\0shape lines\0" + shape_lines.encode())
    for path in followed_files(info):  # the workspace files its imports are evaluated from (workspace_imports.py)
        h.update(f"\0followed {path}={_text_hash(path)}".encode())
    return h.hexdigest()[:20]


def _text_hash(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return "unreadable"


def _module_part(info: ModuleInfo) -> tuple[str, frozenset[str]]:
    """The hash of the module's top-level statements that are not definitions nor a main block, and the names
    they read (computed once per module: every kernel's key shares it)."""
    if info._shared is None:
        assert info.tree is not None
        h = hashlib.sha256()
        names: set[str] = set()
        for stmt in info.tree.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) or _is_main_block(stmt):
                continue
            h.update(normal_dump(stmt).encode() + b"\0")
            names |= _loaded_names(stmt)
        info._shared = (h.hexdigest(), frozenset(names))
    return info._shared


def _top_level_definitions(tree: ast.Module) -> dict[str, list[ast.stmt]]:
    table: dict[str, list[ast.stmt]] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            table.setdefault(stmt.name, []).append(stmt)
    return table


def _loaded_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _is_main_block(stmt: ast.stmt) -> bool:
    """`if __name__ == "__main__":` (what the analysis never runs)."""
    test = stmt.test if isinstance(stmt, ast.If) else None
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and len(test.comparators) == 1 and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value == "__main__")


def target_name(target: ast.expr, axis: int) -> str:
    """The loop variable naming dim `axis` of a `for` target (`tile_m`, or `tile[1]` for a single name)."""
    if isinstance(target, ast.Name):
        return target.id if axis == 0 else f"{target.id}[{axis}]"
    if isinstance(target, ast.Tuple | ast.List) and axis < len(target.elts):
        elt = target.elts[axis]
        return elt.id if isinstance(elt, ast.Name) else f"tile{axis}"
    return f"tile{axis}"


@functools.lru_cache(maxsize=256)
def assigned_names(stmts: tuple[ast.stmt, ...]) -> frozenset[str]:
    """Names a block of statements assigns (loop-carried candidates). Kept per block: the tuner traces the
    same loops hundreds of times."""
    names: set[str] = set()
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return frozenset(names)
