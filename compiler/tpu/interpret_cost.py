"""What interpreting a compiled kernel on a CPU costs, for `check`: whether TPU interpret mode (which simulates every
grid step and its memory) finishes in reasonable time, whether Pallas's HLO interpreter (runtime.hlo_interpreter)
would instead, and whether interpret mode can allocate its VMEM at all. Reads a compiled kernel's plan and arguments;
runs nothing."""

from __future__ import annotations

import math
from typing import Any

from ..ir.specs import TensorSpec, format_args

# Beyond these (after reducing), interpreting takes minutes: the kernel is not run (see too_large).
# Upstream's flex attention, 1,024 steps and 12.6M elements, takes ~13 s a strategy; mamba2 (20,480
# steps, 67M elements) over 5 minutes.
INTERPRET_STEPS = 4096
INTERPRET_ELEMENTS = 1 << 25
# Past those, a kernel whose work fits this runs in Pallas's HLO interpreter instead (tpu/runtime.py hlo_interpreter:
# ~9x faster, not blind to results but to races and uninitialised reads), labelled so on its row: vector elements
# and MXU flops of every grid step and inner iteration, as the performance model counts them. vLLM's
# mla_decode_softmax_reduce (2,048 steps of 4 splits, ~1.6e8) took 17 s on the 2-core helper machine.
HLO_INTERPRET_WORK = 2e9
# ... and whose tensors are no more than this many elements: the HLO interpreter's cost grows with them too (add
# over two f32[8192, 8192], 1.3e8 elements and little work, took 119 s on 2 cores; mla_decode_softmax_reduce has 5.3M)
HLO_INTERPRET_ELEMENTS = 1 << 25
# TPU interpret mode past this much work (the same count) takes many minutes whatever its step count: vLLM's
# mla_decode_kv_split gathers 128 of 2,048 rows by a one-hot matmul at each of its 2,048 steps (6.2e11, and 4 times
# that at the generator's lengths: not done within 7 minutes in the HLO interpreter either).
INTERPRET_WORK = 1e11
# Interpret mode allocates a call's VMEM buffers and temporaries in host memory: a config whose estimate is
# past this (upstream jagged_dense_add's one-hot gather from 1.28M elements: 102 GiB) runs reduced, or not.
INTERPRET_VMEM_BYTES = 1 << 32


def too_large(ck: Any) -> str | None:
    """Why `ck` would take many minutes to interpret on a CPU (shapes the reduction could not shrink: sizes
    its asserts tie together, index tables), or None. Interpreting costs per grid step and element."""
    steps = sum(math.prod(c.grid) * max([lp.trips for lp in c.inner_loops] or [1]) for c in ck.plan.calls)
    count = elements(dict(ck.args))
    if vmem_too_large(ck):
        return f"its VMEM estimate, {ck.vmem.total_bytes / 2**30:.1f} GiB at {format_args(ck.args)}, is more than " \
               f"interpret mode can allocate here"
    cost = work(ck)
    if steps <= INTERPRET_STEPS and count <= INTERPRET_ELEMENTS and cost <= INTERPRET_WORK:
        return None
    if cost > INTERPRET_WORK:
        return f"{steps} grid steps of {cost / steps:.2g} flops and vector elements each at {format_args(ck.args)} " \
               f"are too many to interpret here (run the check on a TPU)"
    return f"{steps} grid steps and {count:,} tensor elements at {format_args(ck.args)} are too many to interpret here"


def work(ck: Any) -> float:
    """MXU flops and vector elements of every grid step and inner iteration, as the performance model counts them (a
    loop whose bounds are computed on the device counts one iteration: at least this much)."""
    total = 0.0
    for c in ck.plan.calls:
        step = c.outer_work.mxu_flops + c.outer_work.vpu_elems
        step += sum(lp.trips * (lp.work.mxu_flops + lp.work.vpu_elems) for lp in c.inner_loops)
        total += math.prod(c.grid) * step
    return total


def hlo_interpretable(ck: Any) -> bool:
    """Can `ck`, too large for TPU interpret mode, be run in the HLO interpreter within a few minutes? Not a kernel
    that copies rows by DMA (what TPU interpret mode simulates), nor one past HLO_INTERPRET_WORK."""
    if vmem_too_large(ck) or any(s.role.startswith("dma") for c in ck.plan.calls for s in c.scratch):
        return False
    return work(ck) <= HLO_INTERPRET_WORK and elements(dict(ck.args)) <= HLO_INTERPRET_ELEMENTS


def vmem_too_large(ck: Any) -> bool:
    return ck.vmem.total_bytes > INTERPRET_VMEM_BYTES


def elements(specs: dict[str, Any]) -> int:
    return sum(math.prod(s.shape) for s in specs.values() if isinstance(s, TensorSpec))
