"""A live Python function given as a kernel argument (flex attention's `score_mod`, `mask_mod`) as a
`CallableSpec`: its source text and the free names its body reads, resolved to what they are now.

Used where real objects exist: a kernel called from Python (`compiler.load(text).kernel.compile(args=...)`,
`CompiledKernel(...)`, the check and tune workers) and, in a compile worker, for torch's own flex-attention
callables a file reaches only through the library (`_identity`, `noop_mask`): their source is read from the
installed torch, never from executing the user's file. A name the body reads must be a number, a bool, a dtype
or a module; anything else is a `CallableError` naming it. Imports no torch.

Also the two ways between live values and specs: `coerce_args` (what `compile(args=...)` takes: text, specs,
tensors, dtypes, functions) and `runtime_value` (what a kernel is called with for a non-tensor spec). They
live here, above specs.py, because a function is made a spec and run again only here: specs.py is plain data
and text, and imports nothing of this module.
"""

from __future__ import annotations
import __future__

import ast
import builtins
import functools
import inspect
import linecache
import sys
import textwrap
import types
from typing import Any

from ..support.syntax import parse
from .specs import (
    DTYPES,
    ArgSpec,
    CallableSpec,
    DtypeSpec,
    SpecError,
    TensorSpec,
    is_spec,
    parse_args_text,
    parse_spec,
)

# torch's own callables a flex-attention wrapper picks when the caller gives none (`score_mod = _identity`,
# `_create_empty_block_mask(q, k).mask_mod`); the call-shape search resolves these by name
LIBRARY_CALLABLES = frozenset({
    "torch.nn.attention.flex_attention._identity",
    "torch.nn.attention.flex_attention.noop_mask",
})


class CallableError(SpecError):
    """A function argument that cannot be compiled in (no source, or it reads something unknown)."""


class SpecFunction:
    """The Python function a `CallableSpec` says, for running a kernel from its shape sets (the check and the
    tuner's correctness gate give it to the compiled kernel and to the eager reference, in another process:
    it pickles as its spec). Built on first call from the source and the resolved names."""

    def __init__(self, spec: CallableSpec):
        self.spec = spec
        self._fn: Any = None

    def __reduce__(self) -> tuple:
        return SpecFunction, (self.spec,)

    def __repr__(self) -> str:
        return f"<function {self.spec}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._fn is None:
            namespace = {name: _value(kind, value) for name, kind, value in self.spec.names}
            source = self.spec.source.strip()
            if source.startswith("lambda"):
                self._fn = eval(compile(f"({source})", f"<{self.spec.name}>", "eval"), namespace)  # noqa: S307
            else:
                flags = __future__.annotations.compiler_flag  # annotations name types it need not resolve
                exec(compile(source, f"<{self.spec.name}>", "exec", flags=flags), namespace)  # noqa: S102
                self._fn = namespace[self.spec.name]
        return self._fn(*args, **kwargs)


def _value(kind: str, value: Any) -> Any:
    import importlib

    if kind == "dtype":
        return getattr(importlib.import_module("torch"), value)
    if kind != "module":
        return value
    try:
        return importlib.import_module(value)
    except ImportError:
        parent, _, attr = value.rpartition(".")
        return getattr(importlib.import_module(parent), attr)


def runtime_value(spec: ArgSpec) -> Any:
    """What a kernel is called with for a non-tensor spec (a dtype spec is the torch dtype, a function's the
    function)."""
    if isinstance(spec, CallableSpec):
        return SpecFunction(spec)
    return spec.dtype if isinstance(spec, DtypeSpec) else spec


_KEYWORD_CONSTANTS = frozenset({"True", "False", "None"})  # spec text for constants, as `flag=True` is in a shape line


def coerce_args(args: object) -> dict[str, ArgSpec]:
    """Accept the forms `compile(args=...)` allows: text, a dict of text/specs/numbers."""
    if isinstance(args, str):
        return parse_args_text(args)
    if isinstance(args, dict):
        out = {}
        for k, v in args.items():
            if is_spec(v):
                out[k] = v
            elif isinstance(v, str) and v.isidentifier() and v not in DTYPES and v not in _KEYWORD_CONSTANTS:
                out[k] = v  # a string constant (reduction="sum"); spec text is never a bare name
            elif isinstance(v, str):
                out[k] = parse_spec(v)
            elif _is_tensor(v):
                out[k] = TensorSpec(v.dtype, tuple(v.shape), tuple(v.stride()))  # row-major strides are None
            elif _is_dtype(v):
                out[k] = DtypeSpec(str(v).removeprefix("torch."))
            elif callable(v):
                out[k] = callable_spec(v, k)  # SpecError (a CallableError) when it reads what cannot be known
            else:
                raise SpecError(f"{k}: unsupported argument spec {v!r}")
        return out
    raise SpecError("args must be a dict or a string like 'x=f32[8, 128]'")


def _is_tensor(value: Any) -> bool:
    """A torch.Tensor (without importing torch: a process that has not imported it has none)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _is_dtype(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.dtype)


def callable_spec(fn: Any, param: str = "") -> CallableSpec:
    """`fn` as a spec; `param` names the kernel parameter in messages (and in the error, for its range)."""
    try:
        return _spec(fn, f"`{param}`" if param else "a function argument")
    except CallableError as exc:
        exc.param = param or None
        raise


def _spec(fn: Any, what: str) -> CallableSpec:
    if isinstance(fn, SpecFunction):
        return fn.spec
    if isinstance(fn, types.MethodType | type) or not isinstance(fn, types.FunctionType):
        raise CallableError(f"{what} is {_kind(fn)}: a kernel takes a plain function or lambda here")
    node, text = _node_and_text(fn, what)
    names = _resolve_names(fn, node, what)
    return CallableSpec(text, fn.__name__ if fn.__name__ != "<lambda>" else "<lambda>", names)


def library_callable(qualname: str) -> CallableSpec | None:
    """One of torch's flex-attention callables by its qualified name (None for any other name)."""
    if qualname not in LIBRARY_CALLABLES:
        return None
    import importlib

    module, _, attr = qualname.rpartition(".")
    try:
        fn = getattr(importlib.import_module(module), attr)
        return callable_spec(fn, attr)
    except (ImportError, AttributeError, CallableError):
        return None


def with_file_names(spec: CallableSpec, imports: dict[str, str], constants: dict[str, Any]) -> CallableSpec:
    """A lambda written in the kernel's file (a shape line's `score_mod=lambda ...`) with the file's imports and
    number constants it reads resolved, so that it also runs on its own (SpecFunction)."""
    try:
        node = parse(spec.source.strip(), mode="eval").body
    except SyntaxError:
        return spec
    if not isinstance(node, ast.Lambda):
        return spec
    names = [resolved for name in free_names(node) if (resolved := file_name(name, imports, constants))]
    return CallableSpec(spec.source, spec.name, tuple(names), spec.origin)


def free_names(node: ast.FunctionDef | ast.Lambda) -> list[str]:
    """The names a function's body and defaults read that it does not bind itself, sorted (annotations are
    never evaluated in a kernel)."""
    local = {p.arg for p in ast.walk(node.args) if isinstance(p, ast.arg)}
    code = [*(node.body if isinstance(node.body, list) else [node.body]), *node.args.defaults,
            *(d for d in node.args.kw_defaults if d is not None)]
    names = [n for part in code for n in ast.walk(part) if isinstance(n, ast.Name)]
    local |= {n.id for n in names if isinstance(n.ctx, ast.Store)}
    return sorted({n.id for n in names if isinstance(n.ctx, ast.Load)} - local)


def file_name(name: str, imports: dict[str, str], constants: dict[str, Any]) -> tuple[str, str, Any] | None:
    """A module-level name of the kernel's file a function reads, as a spec's resolved name: an import, or a
    number constant (None for any other name: the kernel's trace reads it as it reads any of the file's)."""
    if name in imports:
        return name, "module", imports[name]
    if isinstance(constants.get(name), bool | int | float):
        return name, "value", constants[name]
    return None


def _kind(fn: Any) -> str:
    if isinstance(fn, types.MethodType):
        return "a bound method"
    if isinstance(fn, type):
        return f"the class {fn.__name__}"
    return f"a {type(fn).__name__}"


def _node_and_text(fn: types.FunctionType, what: str) -> tuple[ast.FunctionDef | ast.Lambda, str]:
    try:
        return _located(fn.__code__)
    except _NoSource as exc:
        raise CallableError(f"{what}: {exc}") from None


class _NoSource(Exception):  # noqa: N818 - a reason, worded for the message
    pass


@functools.lru_cache(maxsize=256)
def _located(code: types.CodeType) -> tuple[ast.FunctionDef | ast.Lambda, str]:
    """The function's node and source text (kept per code object: a kernel checks it on every call)."""
    if code.co_name != "<lambda>":
        try:
            text = textwrap.dedent(inspect.getsource(code))
            tree = parse(text)
        except (OSError, TypeError, SyntaxError) as exc:
            raise _NoSource(f"cannot read the source of `{code.co_name}` ({exc})") from None
        node = tree.body[0] if tree.body else None
        if not isinstance(node, ast.FunctionDef):
            raise _NoSource(f"the source of `{code.co_name}` is not a plain `def`")
        node.decorator_list = []
        return node, ast.unparse(node) if _has_decorators(text) else text.strip()
    lines = linecache.getlines(code.co_filename)
    if not lines:
        raise _NoSource(f"cannot read the source of a lambda defined in {code.co_filename}")
    try:
        tree = parse("".join(lines))
    except SyntaxError:
        raise _NoSource(f"the file of the lambda ({code.co_filename}) does not parse") from None
    cols = {p[2] for p in code.co_positions() if p[0] is not None and p[2] is not None and (p[3] or 0) > p[2]}
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda) and n.lineno == code.co_firstlineno
             and _same_signature(n, code) and _body_holds(n, code, cols)]
    if len(found) != 1:
        raise _NoSource(f"cannot tell which lambda on line {code.co_firstlineno} of {code.co_filename} it is; "
                        "pass a `def` function")
    node = found[0]
    return node, ast.get_source_segment("".join(lines), node) or ast.unparse(node)


def _has_decorators(text: str) -> bool:
    return text.lstrip().startswith("@")


def _same_signature(node: ast.Lambda, code: types.CodeType) -> bool:
    a = node.args
    names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    flags_vararg = bool(code.co_flags & inspect.CO_VARARGS)
    return names == list(code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]) and \
        flags_vararg == (a.vararg is not None)


def _body_holds(node: ast.Lambda, code: types.CodeType, cols: set[int]) -> bool:
    """The compiled lambda's instructions start inside this lambda's body (several lambdas on a line)."""
    body = node.body
    if body.lineno != body.end_lineno or not cols:
        return True
    return body.col_offset <= min(cols) < (body.end_col_offset or 0) and max(cols) <= (body.end_col_offset or 0)


def _resolve_names(fn: types.FunctionType, node: ast.FunctionDef | ast.Lambda,
                   what: str) -> tuple[tuple[str, str, Any], ...]:
    read = free_names(node)
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False))
    out = []
    for name in read:
        if name in cells:
            try:
                value = cells[name].cell_contents
            except ValueError:
                raise CallableError(f"{what} reads `{name}`, which is not yet assigned where it was defined") from None
        elif name in fn.__globals__:
            value = fn.__globals__[name]
        elif hasattr(builtins, name):
            continue
        else:
            raise CallableError(f"{what} reads `{name}`, which is not defined where it was written")
        out.append((name, *_resolved(name, value, what)))
    return tuple(out)


def _resolved(name: str, value: Any, what: str) -> tuple[str, Any]:
    if isinstance(value, types.ModuleType):
        return "module", value.__name__
    if isinstance(value, bool | int | float):
        return "value", value
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.dtype):
        return "dtype", str(value).removeprefix("torch.")
    raise CallableError(f"{what} reads `{name}`, {_kind(value) if not callable(value) else 'a function'}: a function "
                        "compiled into a kernel may read numbers, bools, dtypes and modules (pass other values as "
                        "kernel arguments)")
