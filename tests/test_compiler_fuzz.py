"""Property-based: mutated example kernels (lines deleted, duplicated, swapped, truncated, tokens replaced)
never make `compiler.load` or `Kernel.compile` raise anything but CompileError."""

import logging

from conftest import EXAMPLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import compiler
from compiler import CompileError

SOURCES = [p.read_text() for p in sorted(EXAMPLES.glob("*.py"))]
TOKENS = ["hl.tile", "hl.grid", "x", "0", "-1", "2**40", "None", ":", "(", ")", "[", "]", "torch.float16",
          "for", "while", "+", "@", "hl.dot", "q", "tile_m", "1e9", "'s'", "lambda: 0", "...", "*", "not"]


@st.composite
def mutated(draw):
    lines = draw(st.sampled_from(SOURCES)).splitlines()
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "truncate", "token"]))
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "truncate":
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        else:
            words = lines[i].split(" ")
            w = draw(st.integers(0, len(words) - 1))
            words[w] = draw(st.sampled_from(TOKENS))
            lines[i] = " ".join(words)
    return "\n".join(lines) + "\n"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_no_exception_escapes(source):
    logging.disable(logging.CRITICAL)
    try:
        module = compiler.load(source)
        assert isinstance(module.diagnostics, list)
        for kernel in module.kernels.values():
            for i in range(max(1, len(kernel.shape_sets))):
                try:
                    ck = kernel.compile(shape_set=i)
                except CompileError as exc:
                    assert exc.diagnostics and all(d.code.startswith("HPL") for d in exc.diagnostics)
                    continue
                assert ck.source and ck.vmem.verdict in ("fits", "over_default_limit", "out_of_vmem")
    finally:
        logging.disable(logging.NOTSET)
