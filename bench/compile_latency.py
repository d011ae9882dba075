"""Compile latency: milliseconds for load + IR + code generation per example kernel and config, in a warm
process (median of 20), then the same for upstream's TPU production kernels as written in
tests/kernels/production/ at their production shapes and pinned configs. Goal: <= 30 ms per kernel and config,
>= 5x faster than Helion's Pallas backend.

When the optional `helion` package is importable (pip install 'helion-ls[bench]'), Helion's own Pallas
backend bind + code generation time for the same kernel, shapes and loop type is printed beside ours as a
ratio.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("HELION_BACKEND", "pallas")  # upstream Helion (optional extra) uses its Pallas backend

import compiler  # noqa: E402
from compiler.support.diagnostics import CompileError  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
REPEATS = 20


def measure(path: Path, name: str, shape_set: int, config: dict | None) -> float:
    text = path.read_text()
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        kernel = compiler.load(text).kernels[name]
        kernel.compile(shape_set=shape_set, config=config)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def helion_ms(path: Path, name: str, shape_set: int, config: dict | None) -> str:
    """Upstream Helion's Pallas backend, bind + code generation for the same kernel and shapes (warm, median
    of 3 after a warm-up; the kernel's bind cache is reset each time, as a fresh shape or edit would)."""
    try:
        import helion
        import torch
    except ImportError:
        return "-"
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the bench runs the example file itself, as upstream needs
    kernel = getattr(module, name)
    shapes = compiler.load(path).kernels[name].shape_sets[shape_set]
    args = tuple(torch.empty(s.shape, dtype=s.dtype, device="meta") if hasattr(s, "shape") else s
                 for s in shapes.values())
    times = []
    for _ in range(4):
        kernel.reset()
        start = time.perf_counter()
        bound = kernel.bind(args)
        cfg = helion.Config(**{**dict(bound.config_spec.default_config()), **(config or {})})
        bound.to_code(cfg)
        times.append((time.perf_counter() - start) * 1e3)
    return f"{statistics.median(times[1:]):.1f}"


def main() -> int:
    rows = []
    for path in sorted((REPO / "examples").glob("*.py")):
        for name, k in compiler.load(path).kernels.items():
            try:
                loops = k.config_space(shape_set_args(k)).n_loops
            except CompileError as exc:
                print(f"{path.name}:{name}: {exc}", file=sys.stderr)
                continue
            configs = [None] + ([{"pallas_loop_type": t} for t in ("unroll", "emit_pipeline", "fori_loop")] if loops else [])
            for cfg in configs:
                ours = measure(path, name, 0, cfg)
                try:
                    theirs = helion_ms(path, name, 0, cfg)
                except Exception as exc:  # noqa: BLE001 - upstream failing is reported, not fatal
                    theirs = f"error: {type(exc).__name__}"
                ratio = f"{float(theirs) / ours:.1f}x" if theirs.replace(".", "").isdigit() else "-"
                rows.append((f"{path.stem}:{name}", (cfg or {}).get("pallas_loop_type", "default"), f"{ours:.1f}", theirs, ratio))
    for path in sorted((REPO / "tests" / "kernels" / "production").glob("*.py")):
        for name, k in compiler.load(path).kernels.items():
            shape_set = len(k.shape_sets) - 1 if path.stem == "cross_entropy" else 0  # the 128k vocabulary
            rows.append((f"production/{path.stem}", "pinned", f"{measure(path, name, shape_set, None):.1f}", "-", "-"))
    header = ("kernel", "config", "helion-ls ms", "helion ms", "speed-up")
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(5)]
    for r in [header] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
    print(f"median of {REPEATS} warm runs of load + IR + codegen per kernel and config (shape set 0)")
    return 0


def shape_set_args(kernel):
    return kernel.shape_sets[0] if kernel.shape_sets else None


if __name__ == "__main__":
    sys.exit(main())
