"""Finds a module's shape sets in its own calls (`infer_call_shapes`, see call_shapes.py): records the kernel
calls the module-level evaluation (host_eval.py) makes, each call's arguments as specs
(`call_shapes.InferredShapes`), the call it came from, and what could not be said. Needs torch."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from typing import Any

import torch

from ..ir.callables import LIBRARY_CALLABLES
from ..ir.specs import (
    MAX_ELEMENTS,
    ArgSpec,
    DtypeSpec,
    SpecError,
    TensorSpec,
    format_args,
    format_spec,
    is_spec,
    parse_spec,
)
from ..support.diagnostics import Range, warning
from .call_shapes import InferredShapes, ShapeOrigin
from .callable_specs import callable_spec
from .generator_shapes import generator_shapes
from .host_eval import HostEvaluator
from .host_statements import Exhausted, StepBudget
from .host_torch import approx_notes, has_unknown, tensors_in
from .host_values import UNKNOWN, Closure, KernelChoice, KernelRef, Site
from .module import ModuleInfo
from .unreached import RunFacts, why_unreached
from .values import Module

MAX_SETS = 8  # shape sets per kernel (each is compiled, hovered and tuned on its own)
MAX_NOTES = 5  # diagnostics about limits hit while following the calls
LABEL_CHARS = 60
MAX_STEPS = 100_000  # evaluation steps for a whole module (upstream's examples need 100-1,000): under ~0.5 s


def infer_call_shapes(info: ModuleInfo, wanted: Iterable[str], budget: int = MAX_STEPS,
                      line_label: Callable[[int], str] | None = None) -> InferredShapes:
    """Shape sets of the kernels named in `wanted`, from the calls the module's code makes. Never raises
    for bad code; limits reached become warnings (the shape sets found before them are kept). Imports
    torch (the evaluation works on meta tensors). `line_label` names lines in the labels (`line 12`, or a
    notebook's `cell 3:12`)."""
    wanted = set(wanted) & {k.name for k in info.kernels}
    if info.tree is None or not wanted:
        return InferredShapes()
    return record_calls(info, wanted, budget, *([line_label] if line_label is not None else []))


def record_calls(info: ModuleInfo, wanted: set[str], budget: int,
                 line_label: Callable[[int], str] = lambda line: f"line {line + 1}") -> InferredShapes:
    """Runs the evaluation of the whole module and keeps the calls of the kernels in `wanted`; `line_label`
    names a line in the labels (a notebook's: `cell 7:2`)."""
    recorder = _Recorder(info, wanted, line_label)
    assert info.tree is not None
    ev = HostEvaluator(info, {k.name: k.node for k in info.kernels}, StepBudget(budget), recorder.kernel_call,
                       recorder.note)
    recorder.ev = ev
    complete = False
    try:
        ev.run_module(info.tree)
        complete = True
    except Exhausted as exc:  # said on the innermost loop running then, else where it ran out
        recorder.note(exc.loop or exc.range,
                      f"stopped after {exc.limit:,} evaluation steps (a loop that does not end, or too much work to "
                      "follow); the shape sets found before are kept", force=True)
    except RecursionError:
        recorder.note(Range.lines(0), "the file's calls nest too deeply to follow", force=True)
    if any(k.input_generator for k in info.kernels if k.name in wanted):
        recorder.in_kernel = False
        generator_shapes(info, ev, wanted, recorder.result, _specs, recorder.note)
    result = recorder.result
    result.steps = ev.budget.steps
    _explain_unreached(info, wanted, ev.facts if complete else None, result, line_label)
    return result


def _explain_unreached(info: ModuleInfo, wanted: set[str], facts: RunFacts | None, result: InferredShapes,
                       line_label: Callable[[int], str]) -> None:
    """Why the run called no kernel of `wanted` that got neither a shape set nor a call with unknown arguments
    (`facts` None: the run was cut short)."""
    assert info.tree is not None
    names = sorted(wanted - set(result.sets) - set(result.misses))
    try:
        result.unreached = why_unreached(info.tree, info.source, names, facts, line_label)
    except RecursionError:  # an expression too deep to print: the hints stay general
        pass


class _Recorder:
    """The evaluation's kernel-call and limit callbacks; fills an `InferredShapes`."""

    def __init__(self, info: ModuleInfo, wanted: set[str], line_label: Callable[[int], str]):
        self.info = info
        self.wanted = wanted
        self.line_label = line_label
        self.result = InferredShapes()
        self.ev: HostEvaluator | None = None
        self.seen: dict[str, set[str]] = {}
        self.results: dict[tuple[str, str], Any] = {}
        self.noted: set[Range] = set()
        self.in_kernel = False
        self.lines = info.source.splitlines()

    def note(self, rng: Range, message: str, force: bool = False) -> None:
        if rng in self.noted or (len(self.noted) >= MAX_NOTES and not force):
            return
        self.noted.add(rng)
        self.result.diagnostics.append(
            warning("HPL112", f"finding kernel shapes from this file's calls: {message}", rng))

    def kernel_call(self, ref: KernelRef, args: list, kwargs: dict, site: Site) -> Any:
        """Records a call of kernel `ref` and returns what the kernel returns (from its host code)."""
        if self.in_kernel:
            return UNKNOWN
        specs, why = _specs(ref.closure, args, kwargs, self.info)
        rng = Range.of(site.node) if site.node is not None else Range.lines(0)
        huge = next((t for t in tensors_in([*args, *kwargs.values()]) if t.numel() > MAX_ELEMENTS), None)
        if huge is not None and ref.name in self.wanted:
            self.note(rng, f"`{ref.name}` is called with a tensor of shape {list(huge.shape)}, {huge.numel():.3g} "
                           "elements; shape sets are limited to 2**40")
        elif ref.name in self.wanted:
            if specs is None:
                self.result.misses.setdefault(ref.name, []).append((rng, why))
            else:
                self._record(ref.name, specs, site, ref.note)
        key = (ref.name, format_args(specs)) if specs is not None else None
        if key is not None and key in self.results:
            return _fresh(self.results[key])
        self.in_kernel = True
        assert self.ev is not None
        try:
            value = self.ev.call_closure(ref.closure, list(args), dict(kwargs), rng)
        finally:
            self.in_kernel = False
        if key is not None:
            self.results[key] = value
        return _fresh(value)

    def _record(self, name: str, specs: dict[str, ArgSpec], site: Site, note: str = "") -> None:
        assert self.ev is not None
        call = Range.of(site.node) if site.node is not None else Range.lines(0)
        text = format_args(specs)
        if text in self.seen.setdefault(name, set()):
            return
        if len(self.seen[name]) >= MAX_SETS:
            self.note(call, f"`{name}` is called with more than {MAX_SETS} different shapes; the first {MAX_SETS} "
                            "are its shape sets (add '# helion: args(...)' lines to choose others)")
            return
        self.seen[name].add(text)
        origin = self.ev.origin or site
        node = origin.node if origin.node is not None else site.node
        where = Range.of(node) if node is not None else call
        found = [n for v in self._values(site) for n in approx_notes(v)]
        notes = tuple(dict.fromkeys([*found, *(n for n in (note, self.ev.assumed.note()) if n)]))
        label = f"from {_display(node, origin, self.lines)} at {self.line_label(where.start.line)}"
        self.result.sets.setdefault(name, []).append((specs, ShapeOrigin(label, where, call, notes)))

    @staticmethod
    def _values(site: Site) -> list:
        values = [*site.args, *site.kwargs.values()]
        return [x for v in values for x in (v if isinstance(v, tuple | list) else (v,))]


def _specs(fn: Closure, args: list, kwargs: dict, info: ModuleInfo) -> tuple[dict[str, ArgSpec] | None, str]:
    """The call's arguments as specs in parameter order (defaults left out), or None and why not."""
    node = fn.node
    params = [p.arg for p in (*node.args.posonlyargs, *node.args.args)]
    if len(args) > len(params):
        return None, f"it passes {len(args)} arguments; the kernel takes {len(params)}"
    given = dict(zip(params, args, strict=False))
    for k, v in kwargs.items():
        if k not in params or k in given:
            return None, f"argument `{k}` does not fit the kernel's parameters"
        given[k] = v
    defaults = dict(zip(params[len(params) - len(node.args.defaults):], node.args.defaults, strict=True))
    specs: dict[str, ArgSpec] = {}
    for name in params:
        if name not in given:
            if name not in defaults:
                return None, f"argument `{name}` is not given"
            continue
        value = given[name]
        if name in defaults and _is_default(value, defaults[name]):
            continue  # also before its spec: a default no shape line can say (reduction="mean") is left out
        spec, why = callable_spec(value, info) if _is_function(value) else _spec(value)
        if why:
            return None, f"argument `{name}` {why}"
        if name in defaults and _is_default(spec, defaults[name]):
            continue
        specs[name] = spec
    return specs, ""


def _is_function(value: Any) -> bool:
    return isinstance(value, Closure) or (isinstance(value, Module) and value.qualname in LIBRARY_CALLABLES)


def _spec(value: Any) -> tuple[ArgSpec, str]:
    """An argument value as a spec a shape line can say, or why it cannot be one."""
    if value is UNKNOWN or has_unknown(value):
        return None, "is not known without running the file"
    if isinstance(value, torch.Tensor):
        spec: ArgSpec = TensorSpec(value.dtype, tuple(value.shape), tuple(value.stride()))  # `b.t()` stays so
    elif isinstance(value, torch.Size):
        spec = tuple(int(d) for d in value)
    elif isinstance(value, tuple | list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        spec = type(value)(int(v) for v in value)
    elif isinstance(value, torch.dtype):
        spec = DtypeSpec(str(value).removeprefix("torch."))
    elif isinstance(value, bool | float) or value is None:
        spec = value
    elif isinstance(value, int):
        spec = int(value)
    else:
        kind = "a function" if isinstance(value, Closure | KernelRef | KernelChoice) else f"a {type(value).__name__}"
        return None, f"is {kind}, which a shape line cannot say"
    if not is_spec(spec) or not _round_trips(spec):
        return None, f"is {format_spec(spec)}, which a shape line cannot say"
    return spec, ""


def _round_trips(spec: ArgSpec) -> bool:
    try:
        return parse_spec(format_spec(spec)) == spec
    except SpecError:
        return False


def _is_default(value: Any, default: ast.expr) -> bool:
    """`value` is the parameter's literal default (same type and value)."""
    try:
        literal = ast.literal_eval(default)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return False
    return type(literal) is type(value) and literal == value


def _fresh(value: Any) -> Any:
    """A kernel's result for one call: new meta tensors (attributes such as autograd links are per call)."""
    if isinstance(value, torch.Tensor):
        return torch.empty_like(value, device="meta")
    if isinstance(value, tuple | list):
        return type(value)(_fresh(v) for v in value)
    return value


def _display(node: ast.Call | None, origin: Site, lines: list[str]) -> str:
    """"`check(4096, 2560)`": the call with the values of the plain names it passes, shortened."""
    if node is None:
        return "a call"
    callee = _segment(node.func, lines)
    parts = [_shown(a, v, lines) for a, v in zip(node.args, origin.args, strict=False)]
    parts += [f"{kw.arg}={_shown(kw.value, origin.kwargs.get(kw.arg), lines)}" if kw.arg else
              f"**{_shown(kw.value, None, lines)}" for kw in node.keywords]
    text = re.sub(r"\s+", " ", f"{callee}({', '.join(parts)})")
    if len(text) > LABEL_CHARS:
        text = text[: LABEL_CHARS - 2].rstrip(", ") + "…)"
    return f"`{text}`"


def _shown(arg: ast.expr, value: Any, lines: list[str]) -> str:
    if isinstance(arg, ast.Name) and isinstance(value, int | float | tuple) and not isinstance(value, bool) \
            and len(repr(value)) <= 30:
        return repr(value)
    return _segment(arg, lines)


def _segment(node: ast.expr, lines: list[str]) -> str:
    """The source text of a one-line expression (ast columns are UTF-8 offsets), else its unparsed form."""
    line = node.lineno - 1
    if node.end_lineno == node.lineno and line < len(lines) and node.end_col_offset is not None:
        return lines[line].encode()[node.col_offset:node.end_col_offset].decode(errors="replace")
    return ast.unparse(node)
