"""Exec a kernel module's source with the eager helion and run its kernels.

The source is parsed, cut down to what one kernel needs when a kernel is named (see `prune`), its subscript
keys wrapped (see `rewrite`), and exec'd in a fresh namespace whose builtins serve the eager helion.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from compiler.reference.errors import ReferenceRunError, deepest_line, describe
from compiler.reference.helion_module import builtins_with_helion, helion_modules
from compiler.reference.kernel import EagerKernel, Runtime
from compiler.reference.prune import kernel_module
from compiler.reference.rewrite import KEY_NAME, LOAD_NAME, SIZES_NAME, SLICE_NAME, rewrite_module
from compiler.reference.tiles import sizes
from compiler.support.syntax import parse

DEFAULT_FILENAME = "<helion kernel source>"


class ReferenceModule:
    """The namespace of an exec'd kernel module, with its `@helion.kernel` functions."""

    def __init__(self, namespace: dict[str, Any]):
        self.namespace = namespace

    @property
    def kernels(self) -> dict[str, EagerKernel]:
        return {name: value for name, value in self.namespace.items() if isinstance(value, EagerKernel)}

    def run(self, kernel: str, args: Sequence[Any], block_sizes: Sequence[int] | None = None,
            tunables: Mapping[str, Any] | None = None, exact_dots: bool = False) -> Any:
        found = self.kernels.get(kernel)
        if found is None:
            known = ", ".join(self.kernels) or "none"
            raise ReferenceRunError(
                f"no @helion.kernel function named {kernel!r} (kernels: {known})", kernel=kernel
            )
        return found.run(args, block_sizes=block_sizes, tunables=tunables, exact_dots=exact_dots)


def load_copy(value: object) -> object:
    """What a device-code read holds (`__hl_load__`, rewrite.py): its own values, a copy where indexing gave a
    view of the tensor."""
    return value.clone() if isinstance(value, torch.Tensor) and value._is_view() else value


def load_module(source: str, filename: str = DEFAULT_FILENAME, kernel: str | None = None,
                function: str | None = None) -> ReferenceModule:
    """Exec `source` with the eager helion — only what `kernel` (or the plain `function`) needs when one is
    named (see prune.py); errors become `ReferenceRunError` with the line."""
    lines = source.splitlines()
    try:
        tree = parse(source, filename)
    except SyntaxError as exc:
        raise ReferenceRunError(describe(exc, lines, exc.lineno, None), exc.lineno) from exc
    if kernel is not None or function is not None:
        try:
            tree = kernel_module(tree, kernel or function, plain=kernel is None)
        except KeyError:
            what = "@helion.kernel function" if kernel is not None else "function"
            raise ReferenceRunError(f"no {what} named {kernel or function!r}", kernel=kernel) from None
    code = compile(rewrite_module(tree), filename, "exec")
    runtime = Runtime(filename, lines)
    namespace: dict[str, Any] = {
        "__name__": "helion_reference_module",
        "__file__": filename,
        "__builtins__": builtins_with_helion(helion_modules(runtime)),
        KEY_NAME: runtime.index_key,
        SLICE_NAME: slice,
        SIZES_NAME: sizes,
        LOAD_NAME: load_copy,
    }
    try:
        exec(code, namespace)
    except Exception as exc:
        line = deepest_line(exc.__traceback__, filename)
        raise ReferenceRunError(describe(exc, lines, line, None), line) from exc
    return ReferenceModule(namespace)


def run_reference(
    source: str,
    kernel: str,
    args: Sequence[torch.Tensor | int | float],
    block_sizes: Sequence[int] | None = None,
) -> torch.Tensor | tuple[Any, ...] | None:
    """Run `kernel` from `source` eagerly on `args` (tensors are passed as is, so in-place kernels
    write into them). Only the statements the kernel needs run. `block_sizes` follow Helion's order of
    tiled dims; missing ones get defaults."""
    return load_module(source, kernel=kernel).run(kernel, args, block_sizes)
