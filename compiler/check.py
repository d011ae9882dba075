"""`helion-pallas check`: run each kernel on small random inputs in TPU interpret mode, for each loop
strategy, against the eager reference run of the original source, and print a table.

This executes the user's file (the eager reference), so it is only ever run on request, like their tests.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from .api import load
from .diagnostics import CompileError
from .specs import SpecError, parse_spec


def tolerance(dtype: torch.dtype) -> dict[str, float]:
    if dtype in (torch.bfloat16, torch.float16):
        return {"atol": 3e-2, "rtol": 3e-2}
    return {"atol": 2e-4, "rtol": 2e-4}


def compare(out: Any, expected: Any) -> str | None:
    """None when `out` matches `expected` (tensors or tuples of tensors), else why not."""
    outs = out if isinstance(out, tuple) else (out,)
    exps = expected if isinstance(expected, tuple | list) else (expected,)
    if len(outs) != len(exps):
        return f"{len(outs)} outputs, expected {len(exps)}"
    for i, (o, e) in enumerate(zip(outs, exps, strict=True)):
        if not isinstance(o, torch.Tensor) or not isinstance(e, torch.Tensor):
            if o != e:
                return f"output {i}: {o!r} != {e!r}"
            continue
        try:
            torch.testing.assert_close(o, e.to(o.dtype), **tolerance(o.dtype))
        except AssertionError as exc:
            return f"output {i}: " + str(exc).strip().splitlines()[0]
    return None


def check_file(path: str, kernel_name: str | None, chip: str, loop_types: list[str]) -> int:
    from .reference import load_module, make_inputs, run_reference

    module = load(path)
    source = module.source
    ref_module = load_module(source, filename=path)
    small = ref_module.namespace.get("SMALL")
    kernels = [module.kernels[kernel_name]] if kernel_name else list(module.kernels.values())
    if kernel_name and kernel_name not in module.kernels:
        print(f"helion-pallas: no kernel {kernel_name} in {path}")
        return 2
    failures = 0
    rows = [("kernel", "loop type", "config", "result", "seconds")]
    for k in kernels:
        specs_text = small if isinstance(small, dict) and len(kernels) == 1 else None
        try:
            specs = {n: parse_spec(v) for n, v in specs_text.items()} if specs_text else k.resolve_args()
        except (SpecError, CompileError) as exc:
            rows.append((k.name, "-", "-", f"bad inputs: {exc}", "-"))
            failures += 1
            continue
        inputs = make_inputs(specs)
        types = loop_types if _has_inner_loop(k, specs, chip) else ["-"]
        for lt in types:
            start = time.perf_counter()
            try:
                ck = k.compile(args=specs, config={"pallas_loop_type": lt} if lt != "-" else None, chip=chip)
            except CompileError as exc:
                rows.append((k.name, lt, "-", f"compile error: {exc}", "-"))
                failures += 1
                continue
            args = [a.clone() if isinstance(a, torch.Tensor) else a for a in inputs]
            ref_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in inputs]
            try:
                out = ck(*args)
                expected = run_reference(source, k.name, ref_args, block_sizes=list(ck.config["block_sizes"]))
                if out is None:
                    out, expected = tuple(args[k.params.index(m)] for m in ck.mutated), tuple(
                        ref_args[k.params.index(m)] for m in ck.mutated)
                problem = compare(out, expected)
            except Exception as exc:  # noqa: BLE001 - a failing run is a table row, not a crash
                problem = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
            seconds = f"{time.perf_counter() - start:.2f}"
            rows.append((k.name, lt, ck.config.short(), "ok" if problem is None else f"MISMATCH {problem}", seconds))
            failures += problem is not None
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    print(f"{len(rows) - 1 - failures} passed, {failures} failed")
    return 1 if failures else 0


def _has_inner_loop(kernel: Any, specs: dict, chip: str) -> bool:
    try:
        return bool(kernel.config_space(specs, chip).n_loops)
    except CompileError:
        return False
