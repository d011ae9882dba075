"""Shape sets from a kernel's input generator: the function the file names as `input_generator=` (vLLM's
register_kernel) or registers with `@kernel.register_input_generator`, which returns a dict of case keys to
argument tuples (`CaseKey({"hidden_size": 4096, "num_tokens": 128}) -> (result, input, ...)`) — the shapes the
kernel is tuned for. The generator is followed by the same bounded abstract evaluation as the file's calls
(host_eval.py: meta tensors, never run), with `device="cuda"` the TPU like any device. Each case is a shape set
labelled by its case key ("hidden_size=4096, num_tokens=128"); its `ShapeOrigin.case_key` is the key as a dict
(or the key's string, for the older string keys). Needs torch (call_recorder.py calls this).

A helper the generator imports from another file of the workspace (`from ..utils import get_fp8_min_max`) is
read from that file, as a kernel's helpers are (workspace_imports.py: one mechanism for both). What vLLM's own
helpers mean on a TPU where their files are not in the workspace (its TPU platform keeps the default fp8 type,
float8_e4m3fn) is in `VLLM_HELPERS`; other library calls stay unknown, and a case whose arguments are not all
known is no shape set (why is said once per kernel).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..ir.specs import ArgSpec
from ..support.diagnostics import Position, Range, Related, error, warning
from .call_shapes import InferredShapes, ShapeOrigin
from .host_bounds import bounds_of
from .host_statements import Exhausted, StepBudget
from .host_values import UNKNOWN, Closure
from .module import KernelDef, ModuleInfo
from .module_constants import links
from .vllm_platform import fp8_dtype
from .workspace_imports import Foreign, is_plain

MAX_CASES = 512  # cases kept per kernel (vLLM's have up to ~300)
GENERATOR_STEPS = 400_000  # evaluation steps per generator (silu_mul_fp8's 306 cases take ~60,000)
FP8_MAX = float(torch.finfo(fp8_dtype(None)).max)


@dataclass(frozen=True)
class CaseKey:
    """vLLM's CaseKey (an immutable dict) as the evaluation sees it: its items in the order written."""

    items: tuple[tuple[str, Any], ...]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.items)

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.items)


def case_label(key: Any) -> str:
    """How a case is named on lenses, hovers and the CLI."""
    return key.label if isinstance(key, CaseKey) else str(key)


def generator_shapes(info: ModuleInfo, ev: Any, wanted: set[str], result: InferredShapes,
                     specs_of: Callable[[Closure, list, dict, ModuleInfo], tuple[dict[str, ArgSpec] | None, str]],
                     note: Callable[[Range, str], None]) -> set[str]:
    """Adds to `result` the shape sets of each kernel of `wanted` that has an input generator; the names of
    the kernels it gave shape sets (or misses) to. `ev` has run the module (its globals hold the generator)."""
    done: set[str] = set()
    if ev.links is None:  # the workspace files the generators import from, read as the kernels read them
        ev.links = links(info, None)  # no chip: shape sets are not per chip (the fp8 type is the default's)
    _install_helpers(ev, info)
    for kernel in info.kernels:
        if kernel.name not in wanted or not kernel.input_generator:
            continue
        gen = ev.globals.get(kernel.input_generator)
        rng = Range.of(kernel.node)
        if not isinstance(gen, Closure):
            note(rng, f"`{kernel.input_generator}`, the input generator of `{kernel.name}`, is not a function of this "
                      "file that can be followed")
            continue
        cases = _call_generator(ev, gen, kernel, note)
        if cases is None:
            continue
        done.add(kernel.name)
        _record(kernel, gen, cases, info, result, specs_of)
    return done


def _call_generator(ev: Any, gen: Closure, kernel: KernelDef, note: Callable[[Range, str], None]) -> dict | None:
    rng = Range.of(gen.node)
    outer = ev.budget
    ev.budget = StepBudget(GENERATOR_STEPS)
    try:
        value = ev.call_closure(gen, [], {}, rng)
    except Exhausted as exc:
        note(exc.loop or exc.range, f"the input generator `{gen.name}` of `{kernel.name}` did not finish within "
                                    f"{exc.limit:,} evaluation steps")
        return None
    except RecursionError:
        note(rng, f"the input generator `{gen.name}` nests too deeply to follow")
        return None
    finally:
        ev.budget = outer
    if not isinstance(value, dict):
        note(rng, f"the input generator `{gen.name}` of `{kernel.name}` does not return a dict of cases that can be "
                  "known without running it")
        return None
    return value


def _record(kernel: KernelDef, gen: Closure, cases: dict, info: ModuleInfo, result: InferredShapes,
            specs_of: Callable[[Closure, list, dict, ModuleInfo], tuple[dict[str, ArgSpec] | None, str]]) -> None:
    fn = Closure(kernel.node, None, [], {})
    where = Range.of(gen.node)
    sets = result.sets[kernel.name] = []  # the generator's cases are its shape sets, not the calls'
    result.misses.pop(kernel.name, None)
    misses: list[tuple[str, str]] = []
    seen: set[tuple] = set()
    for key, args in list(cases.items())[:MAX_CASES]:
        label = case_label(key)
        if isinstance(args, torch.Tensor):  # a case of one tensor argument, written without the tuple
            args = (args,)
        if not isinstance(args, tuple | list):
            misses.append((label, "its arguments are not a tuple"))
            continue
        unstored = _no_tpu_storage(fn.node, list(args))
        if unstored is not None:
            misses.append((label, unstored))
            continue
        specs, why = specs_of(fn, list(args), {}, info)
        if specs is None:
            misses.append((label, why))
            continue
        ident = tuple(sorted((k, repr(v)) for k, v in specs.items()))
        if ident in seen:
            continue
        seen.add(ident)
        case_key = key.as_dict() if isinstance(key, CaseKey) else str(key)
        origin = ShapeOrigin(f"case {label} of `{gen.name}()`", where, where, (), case_key=case_key, case_label=label,
                             source=f"{gen.name}()", int_bounds=_int_bounds(fn.node, list(args)))
        sets.append((specs, origin))
    if not sets:
        result.sets.pop(kernel.name, None)
    if not misses:
        return
    label, why = misses[0]
    more = f" (and {len(misses) - 1} other cases)" if len(misses) > 1 else ""
    if sets:
        message = f"case {label} of `{gen.name}()` is no shape set of `{kernel.name}`{more}: {why}"
        result.diagnostics.append(warning("HPL112", f"finding kernel shapes from this file's input generator: "
                                                    f"{message}", where))
        return
    related = (Related(where, f"`{gen.name}()`, the input generator of `{kernel.name}`"),)
    if all(w.startswith(NO_TPU_STORAGE) for _, w in misses):  # the one cause: a dtype no TPU keeps in memory
        # Said once, on the kernel (compiling it would say nothing else), as the error it is on every TPU
        result.unshaped[kernel.name] = error(
            "HPL203", f"`{kernel.name}` cannot run on a TPU: every case of its input generator `{gen.name}()` "
                      f"passes {why.removeprefix(NO_TPU_STORAGE)} (case {label}{more})", _def_line(kernel.node),
            related=related)
        return
    # no shape set at all: this is why, in place of the hint that the kernel has none (never both)
    message = f"case {label} of `{gen.name}()` is no shape set of `{kernel.name}`{more}: {why}"
    result.unshaped[kernel.name] = warning("HPL112", f"finding kernel shapes from this file's input generator: "
                                                     f"{message}", _def_line(kernel.node), related=related)


# Storage types this compiler has for no TPU (torch's packed fp4: JAX has no packed dtype to hand it to): a kernel
# taking such a tensor cannot be compiled for a TPU whatever its code does with it.
NO_TPU_STORAGE = "\0no TPU storage: "
_NO_TPU_DTYPES = tuple(getattr(torch, n) for n in ("float4_e2m1fn_x2",) if hasattr(torch, n))


def _no_tpu_storage(fn: Any, args: list) -> str | None:
    """Why a case cannot be run on any TPU (its first argument of a dtype no TPU stores), else None."""
    params = [p.arg for p in (*fn.args.posonlyargs, *fn.args.args)]
    for name, value in zip(params, args, strict=False):
        if isinstance(value, torch.Tensor) and value.dtype in _NO_TPU_DTYPES:
            dtype = str(value.dtype).removeprefix("torch.")
            return (f"{NO_TPU_STORAGE}`{name}` as torch.{dtype} (two 4-bit floats packed in a byte): there is no fp4 "
                    "storage type for a TPU here (JAX has no packed fp4 dtype to take it), so no shape set can be "
                    "compiled; pass the bytes as uint8 and unpack them in the kernel")
    return None


def _int_bounds(fn: Any, args: list) -> tuple[tuple[str, int, int], ...]:
    """(parameter, lowest, highest) of each integer tensor argument whose values the evaluation followed
    (`torch.arange(pages)`: 0..pages - 1; `torch.full((batch,), seq_len)`: seq_len)."""
    params = [p.arg for p in (*fn.args.posonlyargs, *fn.args.args)]
    out = []
    for name, value in zip(params, args, strict=False):
        bounds = bounds_of(value)
        if bounds is not None and value.dtype != torch.bool:
            out.append((name, *bounds))
    return tuple(out)


def _def_line(node: Any) -> Range:
    """The `def` line of a kernel, from `def` to its name (an ast.arguments node has no position of its own)."""
    start = Range.of(node).start
    return Range(start, Position(start.line, start.character + len("def ") + len(node.name)))


# -- what vLLM's helpers mean on a TPU ---------------------------------------------------------------------

def _case_key(args: list, kwargs: dict, rng: Range) -> Any:
    value = args[0] if args else dict(kwargs)
    if not isinstance(value, dict) or not value or not all(isinstance(k, str) for k in value):
        return UNKNOWN
    if any(v is UNKNOWN for v in value.values()):
        return UNKNOWN
    try:
        key = CaseKey(tuple(value.items()))
        hash(key)
    except TypeError:
        return UNKNOWN
    return key


def _meta(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, device="meta")


def _same_shape(args: list, kwargs: dict, rng: Range) -> Any:
    return args[0] if args and isinstance(args[0], torch.Tensor) else UNKNOWN


def _silu_and_mul(args: list, kwargs: dict, rng: Range) -> Any:
    x = args[0] if args else None
    if not isinstance(x, torch.Tensor) or x.ndim == 0:
        return UNKNOWN
    return _meta((*x.shape[:-1], x.shape[-1] // 2), x.dtype)


def _scaled_quantize(args: list, kwargs: dict, rng: Range) -> Any:
    """vLLM's `scaled_quantize(x, group_shape, quant_dtype, compute_dtype=)`: (x quantized, the scales, one per
    group; -1 in the group shape is the whole dimension)."""
    x = args[0] if args else None
    group = args[1] if len(args) > 1 else kwargs.get("group_shape")
    dtype = args[2] if len(args) > 2 else kwargs.get("quant_dtype")
    if not (isinstance(x, torch.Tensor) and x.ndim == 2 and isinstance(group, tuple) and len(group) == 2
            and isinstance(dtype, torch.dtype)):
        return UNKNOWN
    gm, gn = (x.shape[0] if group[0] == -1 else group[0]), (x.shape[1] if group[1] == -1 else group[1])
    if not (isinstance(gm, int) and isinstance(gn, int) and gm > 0 and gn > 0):
        return UNKNOWN
    scale_dtype = kwargs.get("compute_dtype", torch.float32)
    return _meta(tuple(x.shape), dtype), _meta((x.shape[0] // gm, x.shape[1] // gn), scale_dtype)


def _cdiv(args: list, kwargs: dict, rng: Range) -> Any:
    if len(args) == 2 and all(isinstance(a, int) and not isinstance(a, bool) for a in args) and args[1]:
        return -(-args[0] // args[1])
    return UNKNOWN


# name (the end of a qualified name) -> model, for generators whose helpers' files are not in the workspace;
# the fp8 type is vLLM's TPU platform's with no chip named (vllm_platform.py): shape sets are not per chip
VLLM_HELPERS: dict[str, Callable[[list, dict, Range], Any]] = {
    "current_platform.fp8_dtype": lambda a, k, r: fp8_dtype(None),
    "helion.utils.get_fp8_dtype": lambda a, k, r: fp8_dtype(None),
    "quant_utils.get_fp8_min_max": lambda a, k, r: (-FP8_MAX, FP8_MAX),
    "helion.utils.get_int8_min_max": lambda a, k, r: (-128, 127),
    "quant_utils.scaled_quantize": _scaled_quantize,
    "deep_gemm._ceil_to_ue8m0": _same_shape,
    "activation.SiluAndMul.forward_native": _silu_and_mul,
    "helion._utils.cdiv": _cdiv,
}


def _link(ev: Any, info: ModuleInfo) -> set[str]:
    """Bind the names the file imports from other workspace files to what those files define (the module's run
    bound them as imports, before the links were there); the names bound. A name its file does not give a
    known value stays as imported (and modelled, if VLLM_HELPERS has it)."""
    linked: set[str] = set()
    if ev.links is None:
        return linked
    for local in ev.links.names:
        qualname = info.imports.get(local, "")  # "" for a relative import (`from ..utils import x`)
        if qualname.rsplit(".", 1)[-1] == "CaseKey" or local == "CaseKey":
            continue
        if qualname and any(qualname == k.declared_by for k in info.kernels):
            continue  # the wrapper that declared the kernels (register_kernel): not a generator's helper
        value = ev.links.value(local)
        if isinstance(value, Foreign) or (value is not UNKNOWN and is_plain(value)):
            ev.globals[local] = value
            linked.add(local)
    return linked


def _install_helpers(ev: Any, info: ModuleInfo) -> None:
    """Teach this evaluation the file's CaseKey and the vLLM helpers it imports, by qualified name: an imported
    function (`...quant_utils.get_fp8_min_max`) or an attribute of an imported object
    (`...current_platform` + `.fp8_dtype`)."""
    functions = ev.dispatch.functions
    linked = _link(ev, info)
    for local, qualname in info.imports.items():
        if qualname.rsplit(".", 1)[-1] == "CaseKey":
            functions[qualname] = _case_key
            continue
        if local in linked:
            continue  # read from its file in the workspace, not modelled
        for suffix, model in VLLM_HELPERS.items():
            parts = suffix.split(".")
            for k in range(1, len(parts) + 1):
                prefix, rest = ".".join(parts[:k]), ".".join(parts[k:])
                if qualname == prefix or qualname.endswith("." + prefix):
                    functions[f"{qualname}.{rest}" if rest else qualname] = model
