"""`helion-pallas`: compile, check and tune Helion kernels from the command line (a .py or an .ipynb).

Exit codes: 0 ok, 1 diagnostics or mismatches, 2 usage errors.

`compile` of a shape set with its decorator's config (no --args, no --config) shares remembered results
with the language server (compiler.results): a result kept for the same kernel text at the same place is
printed without compiling (or importing torch); a new one is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # libtpu, when installed, must not claim this process

from .api import Kernel, Module, load  # noqa: E402
from .compiled import CompiledKernel  # noqa: E402
from .ir.chips import canonical_name  # noqa: E402
from .ir.config import Config, ConfigError, check_keys  # noqa: E402
from .ir.specs import SpecError, format_args, parse_args_text  # noqa: E402
from .support.diagnostics import CompileError, Diagnostic  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    ns.exit_when_done = argv is None  # from the command line: `tune` ends the process once it has printed
    try:
        return ns.handler(ns)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="helion-pallas", description="Helion kernels -> Pallas TPU modules")
    sub = parser.add_subparsers(dest="command", required=True)

    c = sub.add_parser("compile", help="print the generated Pallas module (or JSON / VMEM report / Mosaic)")
    _common(c)
    c.add_argument("--config", help="JSON or helion.Config(...) text; missing keys take their defaults")
    c.add_argument("--emit", choices=["pallas", "json", "vmem", "mosaic"], default="pallas")
    c.set_defaults(handler=cmd_compile)

    k = sub.add_parser("check", help="run kernels on small inputs (on this machine's TPU, else in interpret mode "
                                     "after the TPU compiler's verdict) against the eager reference and the "
                                     "file's own reference()")
    k.add_argument("file", help=FILE_HELP)
    k.add_argument("-k", "--kernel")
    k.add_argument("--chip", help="the chip to compile for (default: this machine's TPU, else v7x); on that "
                                  "TPU the kernels run on it, elsewhere in interpret mode")
    k.add_argument("--loop-types", default="unroll,emit_pipeline,fori_loop")
    k.add_argument("--cases", metavar="SEL", help="check these cases of a kernel's input generator (vLLM's "
                   "generate_inputs): 'all', or comma-separated case indices and parts of case labels "
                   "('num_tokens=128'); default: each kernel's first shape set")
    k.add_argument("--json", action="store_true", help="print one JSON object (verdict, where, rows) instead")
    k.set_defaults(handler=cmd_check)

    t = sub.add_parser("tune", help="search configs for each kernel and shape set")
    from .tune.arguments import add_arguments

    add_arguments(t)
    t.set_defaults(handler=_tune)

    x = sub.add_parser("crosscheck", help="the TPU compiler's own estimate of the model's best configs (from the "
                                          "tuning store), and whether it agrees with the model")
    from .tune.arguments import add_crosscheck_arguments

    add_crosscheck_arguments(x)
    x.set_defaults(handler=_crosscheck)

    m = sub.add_parser("measure", help="the per-call time of one config on this machine's TPU (the tpu evaluator), "
                                       "or why it cannot be measured here")
    from .tune.measure_command import add_arguments as add_measure_arguments

    add_measure_arguments(m)
    m.set_defaults(handler=_measure)
    return parser


def _measure(ns: argparse.Namespace) -> int:
    from .tune import measure_command

    return measure_command.run(ns)


def _crosscheck(ns: argparse.Namespace) -> int:
    from .tune import crosscheck_command

    return crosscheck_command.run(ns)


def _tune(ns: argparse.Namespace) -> int:
    from .tune import command  # light: it imports torch once its gate worker is starting

    return command.run(ns)


FILE_HELP = "a Python file, or a Jupyter notebook (.ipynb: its code cells, in order, are the module)"


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help=FILE_HELP)
    p.add_argument("-k", "--kernel", help="kernel name (default: the first kernel in the file)")
    p.add_argument("--args", help='shapes, as inside "# helion: args(...)"')
    p.add_argument("--shape-set", type=int, default=None,
                   help="0-based index of the kernel's shape sets (its shape lines, else those found in the file's "
                        "calls)")
    p.add_argument("--chip", default="v7x")


def _pick_kernel(module: Module, name: str | None) -> Kernel | None:
    if name:
        return module.kernels.get(name)
    return next(iter(module.kernels.values()), None)


def print_diagnostics(diags: list[Diagnostic], module: Module, path: str, stream: Any = sys.stderr) -> None:
    """One line each: `file.py:12:5: error HPL...` (a notebook's: `nb.ipynb:cell 3:12:5: ...`)."""
    for d in diags:
        print(f"{module.describe(d.range.start, path)}: {d.severity.name.lower()} {d.code}: {d.message}", file=stream)


def source_problem(path: str) -> str | None:
    """Why `path` cannot be read as a kernel file, in one line (None when it can)."""
    if not os.path.exists(path):
        return f"no such file: {path}"
    if os.path.isdir(path):
        return f"{path} is a directory; give a Python file or a Jupyter notebook"
    if not os.access(path, os.R_OK):
        return f"cannot read {path}: permission denied"
    return None


def cmd_compile(ns: argparse.Namespace) -> int:
    problem = source_problem(ns.file)
    if problem is not None:
        print(f"helion-pallas: {problem}", file=sys.stderr)
        return 2
    module = load(Path(ns.file))
    errors = [d for d in module.diagnostics if d.is_error]
    kernel = _pick_kernel(module, ns.kernel)
    if kernel is None:
        print_diagnostics(module.diagnostics, module, ns.file)
        print(f"helion-pallas: no kernel {ns.kernel or ''} in {ns.file}".replace("  ", " "), file=sys.stderr)
        return 1 if errors else 2  # a file that does not parse is a diagnostic; a missing kernel is usage
    broken = broken_cells(module, ns.file)
    try:
        args = parse_args_text(ns.args) if ns.args else None
        config = Config.parse(ns.config) if ns.config else None
        if config is not None:
            check_keys(config)
    except (SpecError, ConfigError) as exc:
        print(f"helion-pallas: {exc}", file=sys.stderr)
        return 2
    print_diagnostics(module.call_shapes.diagnostics, module, ns.file)
    ns.module, ns.broken = module, broken  # for _print_compiled
    unit = _decorator_unit(kernel, ns) if args is None and config is None and ns.emit != "mosaic" else None
    if unit is not None:
        return _compile_unit(kernel, unit, ns)
    try:
        ck = kernel.compile(args=args, config=config, chip=ns.chip, shape_set=ns.shape_set)
    except CompileError as exc:
        return _print_compiled(kernel, None, "", exc.diagnostics, [], ns)
    if ns.emit == "mosaic":
        return _emit_mosaic(ck, module, ns.file) or int(broken)
    lowering = ck.check_lowering() if ns.emit == "json" else []
    return _print_compiled(kernel, ck, format_args(ck.args), ck.diagnostics, lowering, ns)


def _decorator_unit(kernel: Kernel, ns: argparse.Namespace) -> Any:
    """The unit `compile` prints: a shape set with its decorator's config, else its vLLM platform file's entry
    (None: another chip name that compiling will report, or a shape set out of range)."""
    from .results import kernel_units

    try:
        chip = canonical_name(ns.chip)
    except ValueError:
        return None
    units = kernel_units(kernel, chip, os.path.basename(ns.file), ns.file)  # vLLM's platform file too
    index = ns.shape_set or 0
    return units[index] if 0 <= index < len(units) and kernel.shape_sets else None


def _print_compiled(kernel: Kernel, ck: Any, args: str, diagnostics: Any, lowering: Any,
                    ns: argparse.Namespace) -> int:
    """Print what --emit asks for of a compile (`ck`: a CompiledKernel, a remembered CompiledSnapshot or
    None when it failed), then its diagnostics; the exit status (1 also for a notebook cell that does not
    parse: ns.broken)."""
    name = kernel.name
    diagnostics = _with_file_level(kernel, ns.module, diagnostics)
    if ck is None:
        if ns.emit == "json":
            print(json.dumps({"kernel": name, "diagnostics": [d.to_json() for d in diagnostics]}, indent=2))
        print_diagnostics(list(diagnostics), ns.module, ns.file)
        return 1
    if ns.args is None and ns.emit != "json":
        _say_inferred(kernel, ns.shape_set or 0)
    if ns.emit == "pallas":
        sys.stdout.write(ck.source)
    elif ns.emit == "vmem":
        print(ck.vmem.table())
    elif ns.emit == "json":
        out = {"kernel": name, "args": args, "chip": ck.chip.name, "config": dict(ck.config),
               "config_text": repr(ck.config), "source": ck.source,
               "source_map": [{"line": line, "range": rng.to_json()} for line, rng in ck.source_map],
               "vmem": ck.vmem.to_json(), "diagnostics": [d.to_json() for d in [*diagnostics, *lowering]]}
        print(json.dumps(out, indent=2))
    print_diagnostics(list(diagnostics), ns.module, ns.file)
    return 1 if ns.broken or any(d.is_error for d in diagnostics) else 0


def _with_file_level(kernel: Kernel, module: Module, diagnostics: Any) -> list[Diagnostic]:
    """A compile's diagnostics with what the file says of the kernel before any compile (its settings, a
    branch it is defined on, its shape lines, the file's syntax): the language server shows those too."""
    out = list(diagnostics)
    seen = {(d.code, d.range, d.message) for d in out}
    for d in [*module.info.diagnostics, *kernel.definition.diagnostics]:
        if (d.code, d.range, d.message) not in seen:
            seen.add((d.code, d.range, d.message))
            out.append(d)
    return out


def _compile_unit(kernel: Kernel, unit: Any, ns: argparse.Namespace) -> int:
    """A decorator unit: from the remembered results when they were found on this very text, else
    compiled (as the language server compiles it) and remembered."""
    from .results import AnalysisCache, StageRecord, compile_unit, front_record, kernel_text

    cache = AnalysisCache()
    stages = ["front", "lower"] if ns.emit == "json" else ["front"]
    found = cache.get_many([(stage, unit.key) for stage in stages])
    text, line = kernel_text(kernel)
    if all((s, unit.key) in found and (found[(s, unit.key)].basis, found[(s, unit.key)].basis_line) == (text, line)
           for s in stages):
        front = found[("front", unit.key)]
        lowering = found[("lower", unit.key)].diagnostics if "lower" in stages else ()
        return _print_compiled(kernel, front.compiled, unit.key.shape_key, front.diagnostics, lowering, ns)
    try:
        ck = compile_unit(kernel, unit)
    except CompileError as exc:
        cache.put_many([front_record(kernel, unit, exc.diagnostics, None)])
        return _print_compiled(kernel, None, "", exc.diagnostics, [], ns)
    records = [front_record(kernel, unit, ck.diagnostics, ck)]
    lowering = []
    if ns.emit == "json":
        lowering = ck.check_lowering()
        records.append(StageRecord("lower", unit.key, tuple(lowering), text, line))
    cache.put_many(records)
    return _print_compiled(kernel, ck, unit.key.shape_key, ck.diagnostics, lowering, ns)


def broken_cells(module: Module, path: str) -> bool:
    """Print the syntax errors of a notebook's cells that do not parse (the other cells' kernels still
    compile, so they are not the only thing said); True when there are any."""
    found = list(module.notebook.diagnostics) if module.notebook is not None else []
    print_diagnostics(found, module, path)
    return bool(found)


def _say_inferred(kernel: Kernel, index: int) -> None:
    """Which shape set a compile used, when it was found in the file's calls rather than on a shape line."""
    origin = kernel.shape_set_origins[index] if index < len(kernel.shape_set_origins) else None
    if origin is not None:
        notes = "".join(f" ({n})" for n in origin.notes)
        print(f"helion-pallas: {kernel.name}: shape set {index} of {len(kernel.shape_sets)}, "
              f"{format_args(kernel.shape_sets[index])}, {origin.label.replace('`', '')}{notes}", file=sys.stderr)


def _emit_mosaic(ck: CompiledKernel, module: Module, path: str) -> int:
    """Readable Mosaic MLIR: from the real libtpu compile when installed, else from the lowering."""
    from .tpu.libtpu_compile import libtpu_available
    from .tpu.lowering import mosaic_text

    diags = ck.check_lowering()
    if diags:
        print_diagnostics(diags, module, path)
        return 1
    if libtpu_available():
        diags = ck.check_tpu_compile()
        result = ck.truth["libtpu"].raw
        if result is not None and result.ok:
            for k in result.kernels:
                print(f"// kernel {k.name}: op counts {json.dumps(k.categories)}")
                print(k.final or k.mosaic)
            return 0
        print_diagnostics(diags, module, path)
        return 1
    print("// libtpu is not installed: Mosaic after lowering (before the TPU compiler's passes)")
    print(mosaic_text(ck.truth["lowering"].raw.exported))
    return 0


def cmd_check(ns: argparse.Namespace) -> int:
    from .check import check_file
    from .tpu.runtime import ChipBusy, claim_tpu, machine_chip

    problem = source_problem(ns.file)
    if problem is not None:
        print(f"helion-pallas: {problem}", file=sys.stderr)
        return 2
    module = load(Path(ns.file))
    if not module.kernels:  # e.g. a syntax error: its diagnostic, one line, instead of a traceback
        print_diagnostics(module.diagnostics, module, ns.file)
        print(f"helion-pallas: no kernel in {ns.file} (no @helion.kernel function, nor one a wrapper such as "
              "vLLM's register_kernel declares)", file=sys.stderr)
        return 1 if any(d.is_error for d in module.diagnostics) else 2
    broken = broken_cells(module, ns.file)
    loops = [s.strip() for s in ns.loop_types.split(",") if s.strip()]
    try:
        claim_tpu()  # this process alone: the eager reference's process stays on the CPU
        chip = canonical_name(ns.chip) if ns.chip else machine_chip() or "v7x"
    except ChipBusy as exc:
        print(f"helion-pallas: {exc}", file=sys.stderr)
        return 2
    return check_file(ns.file, ns.kernel, chip, loops, ns.cases, ns.json) or int(broken)


if __name__ == "__main__":
    sys.exit(main())
