"""Kernels called through the file's own helpers: a run_example-like function, functools.partial, module
constants, a loop over sizes, a list of kernels, and a size computed from random data. Read statically.
"""
# ruff: noqa: I001 - imports as upstream's examples write them

import functools

import torch

import helion
import helion.language as hl

ROWS = 32
WIDTHS = (128, 256)
DTYPE = torch.float32


@helion.kernel()
def add_rows(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = x[tile] + y[tile]
    return out


@helion.kernel()
def scale_rows(x: torch.Tensor, factor: float, dims: list[int]) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = x[tile] * factor
    return out


@helion.kernel()
def gather_rows(values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(values)
    for tile in hl.tile(values.size()):
        out[tile] = values[tile]
    return out


def run_kernels(kernels, args, repeat=1):
    """Calls each kernel with the same arguments, like upstream's run_example."""
    kernels = kernels if isinstance(kernels, (list, tuple)) else [kernels]
    results = []
    for fn in kernels:
        for _ in range(repeat):
            results.append(fn(*args))
    return results


def check(width: int) -> None:
    x = torch.randn(ROWS, width, dtype=DTYPE)
    y = torch.zeros_like(x)
    run_kernels([add_rows, lambda a, b: add_rows(b, a)], (x, y))
    double = functools.partial(scale_rows, factor=2.0, dims=[width])
    run_kernels(double, (x.t().contiguous(),), repeat=2)


def jagged() -> None:
    lengths = torch.randint(1, 9, (ROWS,))
    offsets = torch.cat([torch.zeros(1, dtype=torch.int32), torch.cumsum(lengths, dim=0).to(torch.int32)])
    total = int(offsets[-1])
    values = torch.randn(total, 128)
    gather_rows(values, offsets)


def main() -> None:
    for width in WIDTHS:
        check(width)
    jagged()


main()
