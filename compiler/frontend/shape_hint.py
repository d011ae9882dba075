"""The hint for a kernel with no shape set: no `# helion: args(...)` line above it and no call to it that
the file's own code makes with known arguments (call_shapes.py). It is information, not an error — the
kernel is fine, the compiler only lacks shapes — and carries a quick fix that writes shape lines: those of
another kernel of the file that takes the same arguments (upstream's attention variants, which nothing calls,
beside the `attention` the file runs), else one with a placeholder per parameter, from its annotation and
from how the body unpacks its size.
"""

from __future__ import annotations

import ast

from ..ir.specs import ArgSpec, SpecError, format_args, parse_args_text
from ..support.diagnostics import Diagnostic, Fix, Position, Range, Related, hint
from .unreached import Unreached

PLACEHOLDER_DTYPE = "f32"


def no_shapes_hint(fn: ast.FunctionDef, decorator: ast.expr, lines: list[str],
                   misses: list[tuple[Range, str]], unreached: Unreached | None = None,
                   alike: tuple[str, list[dict[str, ArgSpec]]] | None = None) -> Diagnostic:
    """Information on the decorator, with a fix inserting `# helion: args(...)` above it, saying why no call
    gave shapes: the first call whose arguments are not known, or why the file's run never calls the kernel
    (`unreached`, its steps as related information); for a kernel that takes a function (flex attention's
    `score_mod`) no call shows, information on that parameter instead, naming it and the call whose function
    could not be seen (no placeholder fix: no lambda fits every one). `alike`: another kernel taking the same
    arguments and its shape sets, which the fix copies."""
    wanted = _function_param(fn, misses)
    if wanted is not None:
        param, call = wanted
        where = f"the call at line {call[0].start.line + 1}: {call[1]}" if call else "no call in this file passes one"
        return hint("HPL107", f"`{fn.name}` has no shape set: its parameter `{param.arg}` takes a function this "
                    f"tool could not see ({where}); call the kernel in this file with a lambda or a function "
                    "defined here (torch's flex-attention `_identity` and `noop_mask` are known too), or give "
                    f"one in a shape line (`# helion: args(..., {param.arg}=lambda score, *_: score)`)",
                    Range.of(param))
    first = min([fn.lineno] + [d.lineno for d in fn.decorator_list]) - 1
    indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())] if first < len(lines) else ""
    text = f"# helion: args({placeholder_args(fn)})"
    message = f"`{fn.name}` has no shape set: no '# helion: args(...)' line above it and "
    related: tuple[Related, ...] = ()
    if unreached is not None and not misses:
        message += unreached.reason
        related = tuple(Related(rng, why) for rng, why in unreached.related)
    else:
        message += "no call in this file with arguments known without running it"
    if misses:
        rng, why = misses[0]
        message += f" (the call at line {rng.start.line + 1}: {why})"
        related = (Related(rng, f"`{fn.name}` is called here: {why}"),)
    message += "; add a shape line to compile it"
    copied = _shape_lines(alike[1]) if alike is not None else None
    at = Range(Position(first, 0), Position(first, 0))
    if alike is not None and copied is not None:  # the same arguments as `alike[0]`: its shapes, not placeholders
        plural = "s" if len(copied) > 1 else ""
        fix = Fix(f"Add {alike[0]}'s shape line{plural} (the same arguments): {copied[0]}", at,
                  "".join(f"{indent}{line}\n" for line in copied))
    else:
        fix = Fix(f"Add a shape line: {text}", at, f"{indent}{text}\n")
    return hint("HPL107", message, Range.of(decorator), fix=fix, related=related)


def _shape_lines(sets: list[dict[str, ArgSpec]]) -> list[str] | None:
    """`# helion: args(...)` for each set, or None when one does not read back as itself."""
    lines = []
    for specs in sets:
        text = format_args(specs)
        try:
            if parse_args_text(text) != specs:
                return None
        except SpecError:
            return None
        lines.append(f"# helion: args({text})")
    return lines


def required_params(fn: ast.FunctionDef) -> list[str]:
    """The names of the parameters a call must pass."""
    return [p.arg for p in _required(fn)]


def _required(fn: ast.FunctionDef) -> list[ast.arg]:
    """The parameters without a default."""
    a = fn.args
    params = [*a.posonlyargs, *a.args]
    return params[: len(params) - len(a.defaults)]


def _function_param(fn: ast.FunctionDef, misses: list[tuple[Range, str]]
                    ) -> tuple[ast.arg, tuple[Range, str] | None] | None:
    """The parameter taking a function (annotated `Callable`, or one a call passed an unseen function for)
    that keeps the kernel from a shape set, with that call's miss; None when no such parameter."""
    required = _required(fn)
    for p in [*fn.args.posonlyargs, *fn.args.args]:
        miss = next((m for m in misses if m[1].startswith(f"argument `{p.arg}` ")), None)
        takes_function = "Callable" in (ast.unparse(p.annotation) if p.annotation is not None else "")
        if miss is not None and (takes_function or "function" in miss[1]):
            return p, miss
        if takes_function and p in required and not misses:
            return p, None
    return None


def placeholder_args(fn: ast.FunctionDef) -> str:
    """`x=f32[1024, 1024], eps=1.0`: one placeholder per parameter without a default."""
    return ", ".join(f"{p.arg}={_placeholder(p, fn)}" for p in _required(fn))


def _placeholder(param: ast.arg, fn: ast.FunctionDef) -> str:
    kind = _annotation_kind(param.annotation)
    if kind == "int":
        return "1024"
    if kind == "float":
        return "1.0"
    if kind == "bool":
        return "True"
    if kind == "list":
        return "[1024]"
    if kind == "dtype":
        return "torch.float32"
    rank = _rank(param.arg, fn)
    dims = [1024] * rank if rank <= 2 else [8] * (rank - 2) + [1024, 128]
    return f"{PLACEHOLDER_DTYPE}[{', '.join(map(str, dims))}]"


def _annotation_kind(node: ast.expr | None) -> str:
    text = ast.unparse(node) if node is not None else ""
    if "Tensor" in text or not text:
        return "tensor"
    for kind, names in (("list", ("list", "tuple", "Sequence")), ("dtype", ("dtype",)), ("bool", ("bool",)),
                        ("float", ("float",)), ("int", ("int", "constexpr"))):
        if any(text.startswith(n) or f".{n}" in text for n in names):
            return kind
    return "tensor"


def _rank(name: str, fn: ast.FunctionDef) -> int:
    """How many dims the body unpacks from `name` (`m, n = x.size()`), else the highest index it reads
    (`x.size(2)`), else 2."""
    rank = 0
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple) and _size_of(node.value, name):
            return len(node.targets[0].elts)
        index = _size_index(node, name)
        if index is not None:
            rank = max(rank, index + 1)
    return rank or 2


def _size_of(node: ast.expr, name: str) -> bool:
    if isinstance(node, ast.Call) and not node.args:
        node = node.func
        return isinstance(node, ast.Attribute) and node.attr == "size" and _is_name(node.value, name)
    return isinstance(node, ast.Attribute) and node.attr == "shape" and _is_name(node.value, name)


def _size_index(node: ast.AST, name: str) -> int | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
            and _is_name(node.func.value, name) and node.args and isinstance(node.args[0], ast.Constant):
        value = node.args[0].value
    elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape" \
            and _is_name(node.value.value, name) and isinstance(node.slice, ast.Constant):
        value = node.slice.value
    else:
        return None
    return value if isinstance(value, int) and 0 <= value < 8 else None


def _is_name(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name
