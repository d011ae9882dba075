"""Eager kernel calls: `EagerKernel` (what `@helion.kernel` returns) and `Runtime` (the active launch).

One `Runtime` belongs to one exec'd module; `helion.language` functions ask it for the current `Launch`.
Exceptions raised while a kernel runs come back as `ReferenceRunError` with the kernel source line.
While a kernel runs, `MixedPrecisionMatmul` gives `addmm`/`baddbmm` Helion's f32-accumulator semantics,
`RacingStores` stops a store that writes an element twice with different values (races.py),
`UninitializedAsNaN` fills `torch.empty` as interpret mode fills unwritten memory and, in a kernel that calls
`hl.jagged_tile`, `AxesMode` masks the jagged positions (jagged.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from types import CodeType
from typing import Any

from compiler.ir.config import Config, as_config
from compiler.reference.errors import ReferenceRunError, deepest_line, describe
from compiler.reference.jagged import Axes, AxesMode
from compiler.reference.matmul_mode import MixedPrecisionMatmul
from compiler.reference.scans import torch_scan_replaced
from compiler.reference.tiles import Launch, index_key
from compiler.reference.uninitialized import UninitializedAsNaN


class Runtime:
    """The user's module (for error lines) and the stack of running kernel launches."""

    def __init__(self, filename: str, source_lines: list[str]):
        self.filename = filename
        self.source_lines = source_lines
        self._launches: list[Launch] = []

    @property
    def running(self) -> bool:
        return bool(self._launches)

    def current(self, what: str) -> Launch:
        if not self._launches:
            raise RuntimeError(f"{what} may only be used inside a @helion.kernel function")
        return self._launches[-1]

    @contextmanager
    def launch(self, fn: Callable[..., Any], block_sizes: Sequence[int] | None,
               tunables: Mapping[str, Any] | None = None, exact_dots: bool = False) -> Iterator[Launch]:
        axes = Axes() if _calls_jagged_tile(fn.__code__) else None
        launch = Launch(fn.__code__, block_sizes, tunables, axes)
        self._launches.append(launch)
        try:
            with launch.races, MixedPrecisionMatmul(exact_dots), UninitializedAsNaN(), torch_scan_replaced(), \
                    AxesMode(axes) if axes else nullcontext():
                yield launch
        finally:
            self._launches.pop()

    def index_key(self, key: object, base: object = None) -> object:
        """`index_key`, remembering the Tiles of a jagged kernel's keys (its stores and loads are masked)."""
        converted = index_key(key, base)
        if self._launches and self._launches[-1].axes is not None:
            self._launches[-1].axes.remember_key(converted, key)
        return converted


def _calls_jagged_tile(code: CodeType) -> bool:
    """Does the kernel's code (nested functions included) name `jagged_tile`?"""
    return "jagged_tile" in code.co_names or any(
        _calls_jagged_tile(c) for c in code.co_consts if isinstance(c, CodeType))


class EagerKernel:
    """A kernel function run eagerly; block sizes come from the call, else the decorator's config."""

    def __init__(self, fn: Callable[..., Any], runtime: Runtime, settings: dict[str, Any]):
        self.fn = fn
        self.name: str = fn.__name__
        self.settings = settings
        configs = settings.get("configs") or ()
        self.config: Config = as_config(settings.get("config") or (configs[0] if configs else None))
        self.resolved_block_sizes: list[int] = []  # of the last call, one per tiled dim
        self._runtime = runtime
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.run(args, kwargs)

    def run(
        self,
        args: Sequence[Any],
        kwargs: dict[str, Any] | None = None,
        block_sizes: Sequence[int] | None = None,
        tunables: Mapping[str, Any] | None = None,
        exact_dots: bool = False,
    ) -> Any:
        """`tunables`: hl.register_tunable values by name (a config's), else the decorator config's, else each
        fragment's default. `exact_dots`: every float product summed in f64 (matmul_mode.py)."""
        if block_sizes is None:
            block_sizes = self.config.get("block_sizes")
        runtime = self._runtime
        try:
            with runtime.launch(self.fn, block_sizes, dict(self.config) if tunables is None else tunables,
                                exact_dots) as launch:
                result = self.fn(*args, **(kwargs or {}))
        except ReferenceRunError:
            raise
        except Exception as exc:
            line = deepest_line(exc.__traceback__, runtime.filename)
            raise ReferenceRunError(
                describe(exc, runtime.source_lines, line, self.name), line, self.name
            ) from exc
        self.resolved_block_sizes = list(launch.resolved)
        return result

    def __repr__(self) -> str:
        return f"<eager helion kernel {self.name}>"
