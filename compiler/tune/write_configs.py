"""`helion-pallas tune --write-configs`: each shape set's tuned best written where vLLM reads it, the entry of
its case key (the default entry without one) in `configs/<kernel>/<platform>.json` for the chip tuned for
(compiler/ir/vllm_configs.py; the language server's *Apply* writes the same entries)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..ir import vllm_configs as vc

if TYPE_CHECKING:
    from .driver import TuneResult


class NoConfigsFolder(Exception):
    """The kernel has no `configs/<kernel>/` folder and none was named."""


def configs_folder(file: str, kernel_name: str, op_name: str, base: str | None) -> Path:
    """`base/<op>` when a configs folder was named, else the kernel's own `configs/<op>/` (beside its file or
    above it)."""
    if base:
        return Path(base) / op_name
    found = vc.kernel_configs_dir(file, op_name)
    if found is None:
        raise NoConfigsFolder(f"{kernel_name}: no configs/{op_name}/ folder beside {file} or up to "
                              f"{vc.SEARCH_LEVELS} folders above it; name one: --write-configs DIR")
    return found


def write_results(results: list[TuneResult], file: str, base: str | None) -> list[str]:
    """Write each result's best to its entry; what was written, one line each. Raises NoConfigsFolder, OSError
    or VllmConfigError (a platform file not in vLLM's format is left as it is)."""
    done = []
    for result in results:
        if result.best is None:
            continue
        problem = result.problem
        kernel = problem.load_kernel()
        name = vc.op_name(kernel.definition.node)
        origins = kernel.shape_set_origins
        index = problem.shape_set
        key = vc.case_key_of(origins[index]) if index is not None and index < len(origins) else None
        path = vc.platform_file(configs_folder(file, kernel.name, name, base), problem.chip)
        created = vc.write_entry(path, key, result.best.config)
        where = "the default entry" if not key else f"entry {vc.describe_key(key)}"
        done.append(f"{kernel.name}: wrote {where} of {os.path.relpath(path)}{' (new file)' if created else ''}")
    return done
