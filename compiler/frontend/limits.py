"""Bounds on analysing a kernel, so that no file can keep the compiler busy: each ends in a diagnostic.

Host code is evaluated abstractly, but its integer and sequence arithmetic is real Python, and one
operation can run for minutes holding the interpreter (`7**4095**4095`, `max(range(10**11))`, `"x" * 10**12`).
So operations that can grow are checked before they run (`check_binary`, `check_range`, `check_count`,
`check_product`), the tracer counts evaluation steps (`Budget`), and expressions nested deeper than the
compiler's recursion can follow are found before tracing (`too_deep`). Going over a limit is an HPL105 (or
HPL101) diagnostic on the offending expression. The language server also runs compiles in worker
processes with a time limit; these bounds make the common cases a precise diagnostic instead of a timeout.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from ..support.diagnostics import Diagnostic, Range, UserError, error

MAX_INT_BITS = 1 << 13  # integers in host code: up to 8,192 bits (2,467 digits: they still print)
MAX_SEQUENCE = 1 << 16  # elements of a range, tuple, list or string built in host code
MAX_STEPS = 500_000  # expressions evaluated in one trace, inlined helpers included
MAX_EXPRESSION_DEPTH = 100  # nesting of one expression (a 101-term `a + b + ...` chain is 100 deep)
MAX_NDIGITS = 10_000  # round(x, n)


class Budget:
    """Evaluation steps of one trace."""

    def __init__(self, limit: int = MAX_STEPS):
        self.limit = limit
        self.steps = 0

    def step(self, rng: Range) -> None:
        self.steps += 1
        if self.steps > self.limit:
            raise UserError(
                "HPL105",
                f"the kernel's host code takes more than {self.limit:,} evaluation steps to analyse; "
                "simplify it (deeply recursive helpers?)",
                rng,
            )


def _bits(v: Any) -> int:
    return v.bit_length() if isinstance(v, int) else 0


def _too_big_int(bits: int, rng: Range) -> UserError:
    return UserError(
        "HPL105", f"this integer would have about {bits:,} bits; host code is limited to {MAX_INT_BITS:,}-bit integers", rng
    )


def check_count(n: int, rng: Range, what: str = "this sequence") -> None:
    if n > MAX_SEQUENCE:
        raise UserError(
            "HPL105", f"{what} would have {n:,} elements; host code is limited to {MAX_SEQUENCE:,}", rng
        )


def check_binary(op: str, a: Any, b: Any, rng: Range) -> None:
    """Raise before `a <op> b` when its result would be too large to compute quickly."""
    if isinstance(a, int) and isinstance(b, int):
        if op == "pow" and b > 0 and abs(a) > 1:
            bits = int(b * math.log2(abs(a))) + 1
            if bits > MAX_INT_BITS:
                raise _too_big_int(bits, rng)
        elif op == "mul" and _bits(a) + _bits(b) > MAX_INT_BITS:
            raise _too_big_int(_bits(a) + _bits(b), rng)
        elif op == "lshift" and b > 0 and a != 0 and _bits(a) + b > MAX_INT_BITS:
            raise _too_big_int(_bits(a) + b, rng)
        return
    sequence = (tuple, list, str, bytes)
    if op == "mul":
        seq, n = (a, b) if isinstance(a, sequence) else (b, a)
        if isinstance(seq, sequence) and isinstance(n, int) and n > 0:
            check_count(len(seq) * n, rng)
    elif op == "add" and isinstance(a, sequence) and isinstance(b, sequence):
        check_count(len(a) + len(b), rng)


def check_range(r: range, rng: Range) -> None:
    check_count(len(r), rng, "this range")


def check_round(args: list[Any], rng: Range) -> None:
    if len(args) > 1 and isinstance(args[1], int) and abs(args[1]) > MAX_NDIGITS:
        raise UserError("HPL105", f"round(): ndigits {args[1]} is out of range (at most ±{MAX_NDIGITS})", rng)


def check_product(values: Any, rng: Range) -> None:
    """`math.prod(values)`: the product of the integers may not exceed the integer limit."""
    if isinstance(values, tuple | list | range):
        if isinstance(values, range):
            check_range(values, rng)
        bits = sum(_bits(abs(v)) for v in values if isinstance(v, int))
        if bits > MAX_INT_BITS:
            raise _too_big_int(bits, rng)


def _expr_depth(root: ast.expr) -> int:
    deepest, todo = 0, [(root, 1)]
    while todo:
        node, depth = todo.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_EXPRESSION_DEPTH:
            return deepest
        todo.extend((child, depth + isinstance(child, ast.expr)) for child in ast.iter_child_nodes(node))
    return deepest


def too_deep(functions: list[ast.FunctionDef]) -> Diagnostic | None:
    """A diagnostic on the first expression in `functions` nested deeper than the compiler can follow."""
    for fn in functions:
        todo: list[ast.AST] = [fn]
        while todo:
            node = todo.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    if _expr_depth(child) > MAX_EXPRESSION_DEPTH:
                        return error(
                            "HPL101",
                            f"this expression nests more than {MAX_EXPRESSION_DEPTH} levels deep, more than the "
                            "compiler follows; split it into several statements (e.g. partial sums)",
                            Range.of(child),
                        )
                else:
                    todo.append(child)
    return None

