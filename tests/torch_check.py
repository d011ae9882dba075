"""Compile a kernel written inline in a test, run it in TPU interpret mode and compare it with plain torch:
the returned values and every tensor argument after the call (in-place writes must match torch's too)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from typing import Any

import torch

import compiler
from compiler.ir.specs import TensorSpec

HEADER = "import torch\nimport helion\nimport helion.language as hl\n\n"
STRATEGIES = ("unroll", "fori_loop", "emit_pipeline")


def kernel_of(body: str) -> compiler.Kernel:
    module = compiler.load(HEADER + textwrap.dedent(body))
    assert not [d for d in module.diagnostics if d.is_error], module.diagnostics
    return next(iter(module.kernels.values()))


def specs_of(kernel: compiler.Kernel, inputs: Sequence[Any]) -> dict[str, Any]:
    return {p: TensorSpec(a.dtype, tuple(a.shape)) if isinstance(a, torch.Tensor) else a
            for p, a in zip(kernel.params, inputs, strict=True)}


def compile_for(body: str, inputs: Sequence[Any], config: dict | None = None) -> compiler.CompiledKernel:
    kernel = kernel_of(body)
    return kernel.compile(args=specs_of(kernel, inputs), config=config)


def assert_matches_torch(body: str, inputs: Sequence[Any], torch_fn: Callable[..., Any], config: dict | None = None,
                         rtol: float = 1e-5, atol: float = 1e-5, equal_nan: bool = False) -> compiler.CompiledKernel:
    """`torch_fn` is the kernel in plain torch (it may write its arguments in place, as the kernel may). NaN
    counts as a mismatch unless `equal_nan` (uninitialised VMEM shows up as NaN in interpret mode)."""
    ck = compile_for(body, inputs, config)
    ours = [a.clone() if isinstance(a, torch.Tensor) else a for a in inputs]
    theirs = [a.clone() if isinstance(a, torch.Tensor) else a for a in inputs]
    got = ck(*ours)
    want = torch_fn(*theirs)
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=equal_nan)
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        if isinstance(a, torch.Tensor):
            torch.testing.assert_close(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan,
                                       msg=lambda m, i=i: f"argument {i} after the call: {m}")
    return ck
