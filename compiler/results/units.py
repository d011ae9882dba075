"""The units of analysis of a kernel, as the language server and `helion-pallas compile` both compile them:
one per shape set (one without arguments when it has none), with the config its decorator gives the set
(else, for a kernel vLLM keeps configs for, its entry in vLLM's platform file for the chip), compiled by `compile_unit`, so that a result either of them remembers is the other's too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..ir import vllm_configs as vc
from ..ir.config import Config, ConfigError
from ..ir.specs import format_args
from .keys import UnitKey
from .records import CompiledSnapshot, StageRecord

if TYPE_CHECKING:
    from ..api import Kernel
    from ..compiled import CompiledKernel


@dataclass(frozen=True)
class Unit:
    index: int
    args: dict[str, Any] | None
    config: Config | None
    key: UnitKey
    config_source: str = ""  # where a config the decorator does not give comes from (a vLLM platform file's entry)


def kernel_units(kernel: Kernel, chip: str, file: str, path: str | None = None) -> list[Unit]:
    """`configs=[...]` gives one config per shape set when it has one per set; else `config=` for all. A shape
    set the decorator gives none, of a kernel whose file (`path`) has a vLLM `configs/<kernel>/` folder, runs
    with the entry vLLM would run it with on `chip` (its case key's, else the default), when there is one."""
    shape_sets = list(kernel.shape_sets) or [None]
    configs = list(kernel.decorator_configs or [])
    if not configs or len(configs) != len(shape_sets):
        configs = [kernel.decorator_config] * len(shape_sets)
    origins = list(kernel.shape_set_origins) if kernel.shape_sets else [None]
    sources = [""] * len(shape_sets)
    if path is not None and any(c is None for c in configs):
        configs, sources = _vllm_entries(kernel, chip, path, configs, origins)
    return [Unit(i, args, config, UnitKey(kernel.source_hash, format_args(args) if args else "",
                                          repr(config) if config else "", chip, file, _origin(origins[i]),
                                          kernel.analysis_hash),
                 sources[i])
            for i, (args, config) in enumerate(zip(shape_sets, configs, strict=True))]


def _vllm_entries(kernel: Kernel, chip: str, path: str, configs: list[Config | None],
                  origins: list[Any]) -> tuple[list[Config | None], list[str]]:
    """The configs with each missing one taken from the kernel's vLLM platform file, and where each came from
    ("" where it did not). An unreadable file gives nothing (the hover says why)."""
    sources = [""] * len(configs)
    folder = vc.kernel_configs_dir(path, vc.op_name(kernel.definition.node))
    if folder is None:
        return configs, sources
    platform = vc.platform_file(folder, chip)
    try:
        entries = vc.read_entries(platform)
    except (OSError, vc.VllmConfigError):
        return configs, sources
    out = list(configs)
    for i, config in enumerate(configs):
        entry = vc.find(entries or [], vc.case_key_of(origins[i])) if config is None else None
        if entry is not None:
            try:
                out[i] = Config(entry.config)
            except ConfigError:
                continue
            which = "default entry" if entry.is_default else f"entry {vc.describe_key(entry.key)}"
            sources[i] = f"{folder.parent.name}/{folder.name}/{platform.name}, {which}"
    return out, sources


def _origin(origin: Any) -> str:
    """The call an inferred shape set comes from (call_shapes.ShapeOrigin), as its key's part; "" for none."""
    if origin is None:
        return ""
    at = origin.range.start
    return f"{origin.label} @{at.line}:{at.character}"


def compile_unit(kernel: Kernel, unit: Unit) -> CompiledKernel:
    """Raises CompileError, as `Kernel.compile` does."""
    return kernel.compile(args=unit.args, config=unit.config.to_json() if unit.config is not None else None,
                          chip=unit.key.chip)


def kernel_text(kernel: Kernel) -> tuple[str, int]:
    """The kernel's lines, decorators to the end of its body, and the zero-based line they start at: the
    basis of the ranges in its records."""
    node = kernel.definition.node
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
    return "".join(kernel.source.splitlines(keepends=True)[first : node.end_lineno]), first


def front_record(kernel: Kernel, unit: Unit, diagnostics: list[Any], ck: CompiledKernel | None,
                 seconds: float = 0.0) -> StageRecord:
    basis, line = kernel_text(kernel)
    return StageRecord("front", unit.key, tuple(diagnostics), basis, line,
                       CompiledSnapshot.of(ck) if ck is not None else None, seconds)
