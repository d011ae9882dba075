"""The search space of one tuning problem: a kernel's config space, each config compiled once and scored
by the model, pruned by compile errors and VMEM.

May import: the compiler's public API (compiler.api, config, space, chips, vmem) and this package's
evaluators and search (the `Dimension` type).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from ..api import Kernel
from ..codegen.space import ConfigSpace
from ..ir.chips import get_chip
from ..ir.config import Config, as_config
from ..support.diagnostics import CompileError
from ..vmem.report import fmt_bytes
from .evaluators import ModelEvaluator, Problem
from .objective import objective
from .search import Dimension


class KernelSpace:
    """compiler.codegen.space.ConfigSpace as a search space that also scores configs with the model.

    Each config is compiled once: `is_valid` prunes what does not compile or does not fit VMEM and keeps
    the model's outcome of the rest for `evaluate`. Block sizes whose VMEM floor (compiler/vmem/floor.py: a
    lower bound from one trace) is already over the chip's limit are pruned without tracing them. Configs
    that differ only in the block sizes of the launch grid share a VMEM frontier: grid blocks at least as
    large as some that did not fit cannot fit either (every buffer and temporary grows with them), so they
    are pruned unseen. Inner-loop blocks are not compared: a smaller one can need more VMEM (an unrolled
    loop keeps more iterations' temporaries).
    """

    def __init__(self, problem: Problem, kernel: Kernel, space: ConfigSpace, cache_size: int = 65536):
        self.problem = problem
        self.kernel = kernel
        self.space = space
        self.chip = get_chip(problem.chip)
        self.dimensions = [Dimension(name, tuple(values)) for name, values in space.dimensions]
        self.floor = kernel.vmem_floor(problem.args, problem.chip)
        self.skipped = 0  # configs pruned by the floor, untraced
        self._floors: dict[tuple[int, ...], int] = {}  # block sizes -> self.floor.bytes of them
        self._outcomes: OrderedDict[str, tuple[bool, str, tuple[float | None, dict[str, Any]] | None]] = (
            OrderedDict()
        )
        self._cache_size = cache_size
        self._too_big: dict[str, list[tuple[int, ...]]] = {}  # VMEM frontier per other settings
        self._grid_blocks: frozenset[int] | None = None  # block_sizes indices that tile the launch grid
        self._oom = (
            f"out of VMEM: needs more than the {fmt_bytes(self.chip.max_vmem_limit_bytes)} a kernel can "
            f"request on {self.chip.name}"
        )

    def to_config(self, point: dict[str, Any]) -> Config:
        return self.space.to_config(point)

    def _vmem_class(self, config: Mapping[str, Any]) -> tuple[str, tuple[int, ...]] | None:
        """(every setting but the grid's block sizes and the loop order, the grid's block sizes); None
        while the grid's blocks are not known yet."""
        blocks = config.get("block_sizes")
        grid = self._grid_blocks
        if grid is None or not isinstance(blocks, list | tuple) or not all(isinstance(b, int) for b in blocks):
            return None
        inner = [b if i not in grid else None for i, b in enumerate(blocks)]
        rest = {k: v for k, v in config.items() if k not in ("block_sizes", "loop_orders")}
        return repr((Config(rest), inner)), tuple(b for i, b in enumerate(blocks) if i in grid)

    def _implied_oom(self, config: Mapping[str, Any]) -> bool:
        blocks = config.get("block_sizes")
        if isinstance(blocks, list | tuple) and self._floor_bytes(tuple(blocks)) > self.chip.max_vmem_limit_bytes:
            self.skipped += 1
            return True
        cls = self._vmem_class(config)
        if cls is None:
            return False
        key, blocks = cls
        return any(
            len(small) == len(blocks) and all(b >= s for b, s in zip(blocks, small, strict=True))
            for small in self._too_big.get(key, ())
        )

    def _floor_bytes(self, blocks: tuple[int, ...]) -> int:
        """`self.floor.bytes(blocks)`, once per block sizes (configs that differ in other settings share them)."""
        if blocks not in self._floors:
            self._floors[blocks] = self.floor.bytes(blocks)
        return self._floors[blocks]

    def _outcome(self, config: Mapping[str, Any]) -> tuple[bool, str, tuple[float | None, dict[str, Any]] | None]:
        key = repr(as_config(config))
        if key in self._outcomes:
            self._outcomes.move_to_end(key)
            return self._outcomes[key]
        if self._implied_oom(config):
            outcome: tuple[bool, str, Any] = (False, self._oom, None)
        else:
            try:
                ck = self.problem.compile(config, emit=False)
            except CompileError as exc:
                codes = ", ".join(sorted({d.code for d in exc.diagnostics if d.is_error})) or "error"
                outcome = (False, f"rejected by the compiler ({codes})", None)
            else:
                if self._grid_blocks is None:
                    self._grid_blocks = frozenset(
                        i for lp in ck.plan.loops if lp.kind == "grid" for i in lp.block_size_indices if i is not None
                    )
                if ck.vmem.verdict == "out_of_vmem":
                    outcome = (False, self._oom, None)
                    cls = self._vmem_class(config)
                    if cls is not None and not any(c.widened_blocks for c in ck.plan.calls):
                        self._too_big.setdefault(cls[0], []).append(cls[1])
                else:  # the search ranks by the objective; the trial keeps the model's seconds (metrics)
                    seconds, info = ModelEvaluator().measure(ck).outcome()
                    outcome = (True, "", (None if seconds is None else objective(seconds, info), info))
        self._outcomes[key] = outcome
        if len(self._outcomes) > self._cache_size:
            self._outcomes.popitem(last=False)
        return outcome

    def is_valid(self, config: Mapping[str, Any]) -> tuple[bool, str]:
        ok, reason, _ = self._outcome(config)
        return ok, reason

    def evaluate(self, config: Mapping[str, Any]) -> tuple[float | None, dict[str, Any]]:
        """The model's (objective, metrics) of a config, from its one compile: the objective is the seconds
        with the over-the-default-VMEM margin (objective.py); `metrics["seconds"]` the estimate itself."""
        ok, reason, outcome = self._outcome(config)
        if outcome is None:
            return None, {"error": reason}
        return outcome

    def seed_points(self, configs: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Starting points from known configs (default, decorator, stored best) that belong to the space."""
        points = []
        for config in configs:
            point = self.space.point_of(Config(dict(config)))
            if all(point[name] in values for name, values in self.space.dimensions) and point not in points:
                points.append(point)
        return points
