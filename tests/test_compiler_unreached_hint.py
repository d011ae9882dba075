"""The hint of a kernel the file's run never calls (compiler/frontend/unreached.py): it says where the file
names the kernel and why the run does not get there, with each step as related information."""

from __future__ import annotations

import textwrap

import pytest

import compiler

KERNELS = textwrap.dedent("""\
    import torch
    import helion
    import helion.language as hl
    from helion._testing import DEVICE, run_example


    @helion.kernel()
    def double(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(x.size()):
            out[tile] = x[tile] * 2.0
        return out


    @helion.kernel()
    def halve(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(x.size()):
            out[tile] = x[tile] * 0.5
        return out

""")

PREFIX = "`halve` has no shape set: no '# helion: args(...)' line above it and "


def hint_of(text: str, kernel: str = "halve") -> compiler.Diagnostic:
    module = compiler.load(KERNELS + text)
    assert module.kernels[kernel].shape_sets == []
    return module.kernels[kernel].shape_hint


def line(text: str, needle: str) -> int:
    """One-based line of `needle` in the module KERNELS + text."""
    full = KERNELS + text
    return full[: full.index(needle)].count("\n") + 1


def related(hint: compiler.Diagnostic) -> list[tuple[int, str]]:
    return [(r.range.start.line + 1, r.message) for r in hint.related]


def test_a_kernel_nothing_names_and_one_only_a_comment_names():
    text = "# halve(torch.randn(8, 128))  # off for now\ndouble(torch.randn(8, 128))\n"
    hint = hint_of(text)
    assert hint.message == PREFIX + f"nothing in this file calls it (only a comment names it, at line " \
        f"{line(text, '# halve')}); add a shape line to compile it"
    assert related(hint) == [(line(text, "# halve"), "`halve` is named in this comment")]
    assert hint_of("double(torch.randn(8, 128))\n").message == PREFIX + "nothing in this file calls it; add a " \
        "shape line to compile it"


def test_a_kernel_called_only_in_a_backward_no_gradient_reaches():
    text = textwrap.dedent("""\
        class Double(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return double(x)

            @staticmethod
            def backward(ctx, grad):
                return halve(grad) * 4


        def main():
            x = torch.randn(8, 128, requires_grad=True)
            run_example(Double.apply, lambda x: x * 2, (x,))


        main()
    """)
    hint = hint_of(text)
    call = line(text, "return halve(grad)")
    assert hint.message == PREFIX + (
        f"this file's run never calls it: it is called only in `Double.backward` (line {call}), which is run only "
        "when a gradient flows back through `Double.apply`, which this file's run never asks for (no `.backward()` "
        "on its output, no `run_example(..., bwd=True)`); add a shape line to compile it")
    assert [n for n, _ in related(hint)] == [call, line(text, "def backward")]


def test_a_chain_through_a_table_used_only_on_the_branch_a_tpu_does_not_take():
    text = textwrap.dedent("""\
        def bench_halve():
            halve(torch.randn(64, 128))


        def bench_double():
            double(torch.randn(64, 128))


        GPU_BENCHES = [bench_halve, bench_double]
        TPU_BENCHES = [bench_double]


        def main():
            for bench in (TPU_BENCHES if DEVICE.type == "tpu" else GPU_BENCHES):
                bench()


        main()
    """)
    hint = hint_of(text)
    call, table, test = line(text, "halve(torch.randn"), line(text, "GPU_BENCHES = "), line(text, "for bench in")
    assert hint.message == PREFIX + (
        f"this file's run never calls it: it is called only in `bench_halve` (line {call}), which is named only in "
        f"`GPU_BENCHES` (line {table}), which is used only where `DEVICE.type == 'tpu'` is false (line {test}); add "
        "a shape line to compile it")
    assert related(hint) == [
        (call, f"`halve` is called only in `bench_halve` (line {call})"),
        (table, f"`bench_halve` is named only in `GPU_BENCHES` (line {table})"),
        (test, f"`GPU_BENCHES` is used only where `DEVICE.type == 'tpu'` is false (line {test})")]


@pytest.mark.parametrize("body, words", [
    # a wrapper for another program (a benchmark harness) that the file itself never calls
    ("def halve_for_harness(op, x):\n    return lambda: halve(x)\n\n\ndouble(torch.randn(8, 128))\n",
     "it is called only in `halve_for_harness` (line {call}), which is called nowhere in this file"),
    # a lambda handed to a timing function this tool does not follow
    ("import triton.testing\nx = torch.randn(8, 128)\ntriton.testing.do_bench(lambda: halve(x))\n",
     "it is called only in a lambda passed to `triton.testing.do_bench` (line {call}), which the run never calls"),
])
def test_functions_and_lambdas_the_run_never_calls(body, words):
    hint = hint_of(body)
    call = line(body, "halve(x)")
    assert PREFIX + "this file's run never calls it: " + words.format(call=call) + "; add a shape line" in \
        hint.message


def test_a_run_cut_short_says_only_that_nothing_names_the_kernel():
    endless = "def main():\n    while True:\n        pass\n"
    assert hint_of(endless + "\n\nmain()\n").message == \
        PREFIX + "nothing in this file calls it; add a shape line to compile it"
    # where the run would have gone after the endless loop is not known: no claim about it
    assert hint_of(endless + "    halve(torch.randn(8, 128))\n\n\nmain()\n").message == \
        PREFIX + "no call in this file with arguments known without running it; add a shape line to compile it"


def test_a_call_whose_arguments_are_not_known_is_related_information():
    text = "import os\n\nhalve(torch.load(os.path.join('data', 'x.pt')))\n"
    hint = hint_of(text)
    call = line(text, "halve(torch.load")
    assert f"(the call at line {call}: argument `x` is not known without running the file)" in hint.message
    assert related(hint) == [(call, "`halve` is called here: argument `x` is not known without running the file")]


def test_the_fix_copies_the_shape_sets_of_a_kernel_taking_the_same_arguments():
    """upstream's attention.py runs `attention` and none of its five variants, which take the same q, k, v: the
    variants' fix writes attention's shape lines (real shapes the file uses), not placeholders. A kernel taking
    other arguments keeps the placeholder line."""
    text = "double(torch.randn(8, 128))\ndouble(torch.randn(4, 256, dtype=torch.bfloat16))\n"
    fix = hint_of(text).fix
    assert fix.title == "Add double's shape lines (the same arguments): # helion: args(x=f32[8, 128])"
    assert fix.new_text == "# helion: args(x=f32[8, 128])\n# helion: args(x=bf16[4, 256])\n"
    module = compiler.load(KERNELS + text + "\n\n" + textwrap.dedent("""\
        @helion.kernel()
        def scaled(x: torch.Tensor, s: float) -> torch.Tensor:
            out = torch.empty_like(x)
            for tile in hl.tile(x.size()):
                out[tile] = x[tile] * s
            return out
        """))
    assert module.kernels["scaled"].shape_hint.fix.title.startswith("Add a shape line: # helion: args(x=f32[")
    with_lines = compiler.load(KERNELS.replace("@helion.kernel()\ndef double",
                                               "# helion: args(x=f16[2, 128])\n@helion.kernel()\ndef double"))
    assert with_lines.kernels["halve"].shape_hint.fix.new_text == "# helion: args(x=f16[2, 128])\n"
