"""Configs that fit: candidate fixes for a compile that is out of VMEM (HPL300), each checked by compiling it.

Three kinds, in the order they are offered (but a strategy fix comes first where the out-of-VMEM message
advises emit_pipeline: the fix the message names is the preferred one):
  blocks     the largest block sizes that fit, keeping the strategy: shrink the block whose next smaller
             legal size frees the most VMEM until the kernel fits (giving up when no step frees anything),
             then grow back any block that still fits
  buffering  single-buffered loads (pallas_load_buffer_count=[1, ...], one per tensor argument), when that
             alone fits
  strategy   another inner-loop strategy (e.g. emit_pipeline, which streams resident operands), with the
             blocks shrunk as above when the strategy alone does not fit (where the message advises it, even
             when a fix of another kind was found)
A candidate is kept only when its compile for the same shapes and chip has no error (so no HPL300). Each
compile is ~10 ms; `deadline` (time.monotonic) bounds the search, so callers ask for fixes when a user
looks at them, not on every compile. Imports only the compiler's public API and verdicts.py (what the
message advises).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..ir.config import Config
from ..ir.specs import TensorSpec
from ..support.diagnostics import CompileError
from .verdicts import advises_streaming

if TYPE_CHECKING:
    from ..api import Kernel
    from ..compiled import CompiledKernel

MAX_SHRINK_STEPS = 24


@dataclass(frozen=True)
class VmemFix:
    kind: str  # "blocks" | "buffering" | "strategy"
    changes: dict[str, Any]  # the config keys it sets, with their values
    config: Config  # the config to write: the given one with `changes`
    total_bytes: int  # VMEM the fixed kernel needs (estimate for the chip)


class _Search:
    def __init__(self, kernel: Kernel, args: Any, chip: str, deadline: float):
        self.kernel, self.args, self.chip, self.deadline = kernel, args, chip, deadline

    def expired(self) -> bool:
        return time.monotonic() > self.deadline

    def compile(self, config: Config) -> CompiledKernel | None:
        try:
            return self.kernel.compile(args=self.args, config=config, chip=self.chip, emit=False)
        except CompileError:
            return None

    @staticmethod
    def fits(ck: CompiledKernel | None) -> bool:
        return ck is not None and ck.vmem.verdict != "out_of_vmem" and not any(d.is_error for d in ck.diagnostics)

    def shrink(self, config: Config, sizes: dict[int, list[int]]) -> tuple[Config, CompiledKernel] | None:
        """The largest block sizes that fit with the rest of `config` (None when none do in time)."""
        blocks = list(config.get("block_sizes") or [])
        original = list(blocks)
        found: CompiledKernel | None = None
        total = None
        for _ in range(MAX_SHRINK_STEPS):
            steps = []
            for i, value in enumerate(blocks):
                smaller = [c for c in sizes.get(i, []) if c < value]
                if not smaller or self.expired():
                    continue
                trial = blocks[:i] + [max(smaller)] + blocks[i + 1:]
                ck = self.compile(config.replace(block_sizes=trial))
                if ck is not None:
                    steps.append((ck.vmem.total_bytes, i, trial, ck))
            if not steps:
                return None
            best, _, blocks, ck = min(steps, key=lambda s: (s[0], s[1]))
            if total is not None and best >= total:
                return None  # no smaller block frees anything (e.g. whole-array resident operands)
            total = best
            if self.fits(ck):
                found = ck
                break
        if found is None:
            return None
        for i in range(len(blocks)):  # grow back what still fits
            for bigger in sorted((c for c in sizes.get(i, []) if blocks[i] < c <= original[i]), reverse=True):
                if self.expired():
                    break
                trial = blocks[:i] + [bigger] + blocks[i + 1:]
                ck = self.compile(config.replace(block_sizes=trial))
                if self.fits(ck):
                    blocks, found = trial, ck
                    break
        return config.replace(block_sizes=blocks), found


def vmem_fixes(kernel: Kernel, args: Any = None, config: Mapping | None = None, chip: str = "v7x",
               deadline: float | None = None) -> list[VmemFix]:
    """Fixes for an out-of-VMEM compile of `kernel` for `args` (a shape set's specs) with `config` (as
    written; None for the default). Empty when the compile fits or nothing found fits before `deadline`."""
    search = _Search(kernel, args, chip, deadline if deadline is not None else time.monotonic() + 2.0)
    given = Config(dict(config or {}))
    base = search.compile(given)
    if base is None or base.vmem.verdict != "out_of_vmem":
        return []
    full = base.config  # every key resolved (block sizes, strategy)
    space = kernel.config_space(args, chip)
    sizes = {int(name[len("block_sizes["):-1]): sorted(values) for name, values in space.dimensions
             if name.startswith("block_sizes[")}
    strategies = next((values for name, values in space.dimensions if name == "pallas_loop_type"), [])
    out: list[VmemFix] = []

    def offer(kind: str, fixed: Config, ck: CompiledKernel) -> None:
        changes = {k: v for k, v in fixed.items() if given.get(k) != v and full.get(k) != v}
        if changes and all(dict(f.changes) != changes for f in out):
            out.append(VmemFix(kind, changes, given.replace(**changes), ck.vmem.total_bytes))

    # one compile each first, so a short deadline still finds them; the block search takes many
    quick: list[tuple[str, Config, CompiledKernel]] = []
    ones = [1] * sum(isinstance(spec, TensorSpec) for spec in base.args.values())  # one per tensor argument
    if ones and full.get("pallas_load_buffer_count") != ones:
        single = full.replace(pallas_load_buffer_count=ones)
        ck = search.compile(single)
        if search.fits(ck):
            quick.append(("buffering", single, ck))
    tried = []
    for strategy in strategies:
        if strategy == full.get("pallas_loop_type") or search.expired():
            continue
        other = full.replace(pallas_loop_type=strategy)
        ck = search.compile(other)
        if search.fits(ck):
            quick.append(("strategy", other, ck))
            break
        if ck is not None:
            tried.append((ck.vmem.total_bytes, other))
    shrunk = search.shrink(full, sizes) if not search.expired() else None
    if shrunk is not None:
        offer("blocks", *shrunk)
    for fix in quick:
        offer(*fix)
    advised = any(advises_streaming(call) for call in base.plan.calls)  # the message names emit_pipeline
    if tried and not any(kind == "strategy" for kind, _, _ in quick) and (advised or not out) \
            and not search.expired():
        shrunk = search.shrink(min(tried, key=lambda t: t[0])[1], sizes)  # the strategy that came closest
        if shrunk is not None:
            offer("strategy", *shrunk)
    if advised:  # stable: the other kinds keep their order behind it
        out.sort(key=lambda fix: fix.kind != "strategy")
    return out
