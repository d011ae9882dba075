"""A tuning problem (a kernel of a source text, its argument specs, a chip) and the process's compiles of it.

Torch-free to import (the compiler's front end loads torch when a kernel is first traced), so the tuning
command can parse its problems and start its gate worker before it imports torch itself.
"""

from __future__ import annotations

import functools
import os
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..api import Kernel, load
from ..compiled import CompiledKernel
from ..ir.config import as_config
from ..ir.specs import ArgSpec, format_args
from ..support.diagnostics import CompileError


@dataclass(frozen=True)
class Problem:
    """One tuning problem: a kernel of a source text, its argument specs, a chip. Picklable."""

    source: str
    kernel: str
    args: dict[str, ArgSpec]
    chip: str
    path: str | None = None
    shape_set: int | None = None  # index of the '# helion: args(...)' line, when args came from one

    @property
    def shape_key(self) -> str:
        return format_args(self.args)

    def load_kernel(self) -> Kernel:
        return _kernel(self.source, self.kernel, self.path)

    def require_hbm(self) -> None:
        """Raise the HPL303 of a shape set whose arrays do not fit the chip's HBM: every config would fail in the
        TPU compiler (attention [8, 32, 32768, 256] bf16 on a v5e), so it is said once, before any search. The
        arrays do not depend on the config: one trace tells (the search's own compiles stay one per config)."""
        from ..ir.config import Config
        from ..pipeline import as_chip, trace
        from ..vmem.hbm import hbm_diagnostics

        kernel, chip = self.load_kernel(), as_chip(self.chip)
        try:
            ir, _, _ = trace(kernel, kernel.with_defaults(dict(self.args)), Config(), chip)
        except Exception:  # noqa: BLE001 - what does not trace is the search's to report, config by config
            return
        unfit = hbm_diagnostics(ir, chip, kernel.shape_set_range(self.shape_set))
        if unfit:
            raise CompileError(unfit)

    def compile(self, config: Mapping[str, Any], emit: bool = True) -> CompiledKernel:
        """Compile (raises CompileError). The last few compiles of a process are kept, so that refining or
        checking a config compiles it once. emit=False: plan and VMEM report only (enough for the model),
        not kept."""
        cfg = as_config(config)  # a Config as it is, another mapping made one
        if not emit:
            return self.load_kernel().compile(args=self.args, config=cfg, chip=self.chip, emit=False)
        key = (self.source, self.kernel, self.shape_key, self.chip, repr(cfg))
        ck = _recent.get(key)
        if ck is None:
            ck = self.load_kernel().compile(args=self.args, config=cfg, chip=self.chip)
            _recent[key] = ck
            if len(_recent) > _RECENT_SIZE:
                _recent.popitem(last=False)
        else:
            _recent.move_to_end(key)
        return ck


_RECENT_SIZE = 64
_recent: OrderedDict[tuple[str, ...], CompiledKernel] = OrderedDict()


@functools.lru_cache(maxsize=8)
def _kernel(source: str, name: str, path: str | None = None) -> Kernel:
    """Parsed once per process (workers evaluate many configs of the same kernel); `path` is the file's, for
    the kernel wrappers its project names (frontend/kernel_forms.py)."""
    module = load(source if "\n" in source else source + "\n", where=os.path.abspath(path) if path else None)
    if name not in module.kernels:
        raise KeyError(f"no kernel {name!r} in the source (kernels: {', '.join(module.kernels) or 'none'})")
    return module.kernels[name]
