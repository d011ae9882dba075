"""Shapes from a file's own calls (compiler/frontend/call_shapes.py): kernels without a shape line get the
argument shapes the file's code calls them with, found statically; hostile code stays bounded."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest
import torch
from test_checks_libtpu import libtpu

import compiler
from compiler.ir.specs import DtypeSpec, TensorSpec, format_args, parse_args_text
from compiler.support.diagnostics import Severity

HERE = Path(__file__).parent / "upstream_style"
ROWS = (HERE / "rows.py").read_text()
HELPERS = (HERE / "helpers.py").read_text()

HEADER = textwrap.dedent("""\
    import torch
    import helion
    import helion.language as hl


    @helion.kernel()
    def scale(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(x.size()):
            out[tile] = x[tile] * 2.0
        return out

""")


def line_of(text: str, needle: str) -> int:
    """Zero-based line of the first occurrence of `needle`."""
    return text[: text.index(needle)].count("\n")


def sets(module: compiler.Module, kernel: str) -> list[str]:
    return [format_args(s) for s in module.kernels[kernel].shape_sets]


@pytest.fixture(scope="module")
def rows() -> compiler.Module:
    return compiler.load(ROWS, "rows.py")


def test_kernels_called_from_check_through_run_example_get_their_shapes(rows):
    # HALF_DTYPE means bfloat16 on a TPU; each check(m, n) of main's loop is one shape set, labelled by it
    assert sets(rows, "row_softmax") == ["x=bf16[64, 256]", "x=bf16[128, 512]"]
    first, second = rows.kernels["row_softmax"].shape_set_origins
    call = line_of(ROWS, "        check(m, n)")
    assert first.label == f"from `check(64, 256)` at line {call + 1}"
    assert second.label == f"from `check(128, 512)` at line {call + 1}"
    assert first.range.start.line == call
    # the lenses' anchor is the decorator, as for any kernel without a shape line
    kernel = rows.kernels["row_softmax"]
    assert kernel.shape_set_ranges == [kernel.decorator_range] * 2


def test_pretuned_kernels_called_through_their_sweep_harness_get_its_shapes():
    """upstream's pretuned files call their kernels only inside `make_calls`, which `main()` hands to
    `_bench.run_sweep` with the shapes (HPL107, no shape set, before): each shape, once, is a shape set."""
    module = compiler.load((HERE / "sweep.py").read_text(), "sweep.py")
    assert sets(module, "rms_norm") == ["x=bf16[256, 1024], weight=bf16[1024]",
                                        "x=bf16[256, 2048], weight=bf16[2048]",
                                        "x=bf16[512, 768], weight=bf16[768]"]
    assert module.kernels["rms_norm"].shape_set_origins[0].label.startswith("from `run_sweep(shapes, make_calls")


def test_a_lambda_in_a_dict_of_kernels_passes_its_scalar(rows):
    assert sets(rows, "row_scale") == ["x=bf16[64, 256], scale=0.5", "x=bf16[128, 512], scale=0.5"]


def test_autograd_function_forward_and_backward_kernels(rows):
    # eps comes from the call (1e-6, not the default); backward runs because run_example(..., bwd=True)
    # and its gradient and saved tensors have the shapes of the forward's outputs
    assert sets(rows, "rms_fwd") == ["x=bf16[64, 256], weight=bf16[256], eps=1e-06",
                                     "x=bf16[128, 512], weight=bf16[512], eps=1e-06"]
    assert sets(rows, "rms_bwd") == ["grad_out=bf16[64, 256], x=bf16[64, 256], inv_rms=f32[64, 1]",
                                     "grad_out=bf16[128, 512], x=bf16[128, 512], inv_rms=f32[128, 1]"]


def test_every_inferred_shape_set_compiles(rows):
    for name in ("row_softmax", "row_scale", "rms_fwd", "rms_bwd"):
        kernel = rows.kernels[name]
        for i in range(len(kernel.shape_sets)):
            ck = kernel.compile(shape_set=i, emit=False)
            assert not [d for d in ck.diagnostics if d.is_error], (name, i, ck.diagnostics)
            assert ck.vmem.total_bytes > 0


def test_a_kernel_nothing_calls_gets_an_information_hint_with_a_shape_line_fix(rows):
    kernel = rows.kernels["never_called"]
    assert kernel.shape_sets == []
    with pytest.raises(compiler.CompileError) as info:
        kernel.compile()
    (hint,) = info.value.diagnostics
    assert (hint.code, hint.severity) == ("HPL107", Severity.INFORMATION)
    assert hint.range == kernel.decorator_range
    decorator = line_of(ROWS, "@helion.kernel()\ndef never_called")
    # row_softmax takes the same x: its shape sets (from check()), not placeholders
    copied = "# helion: args(x=bf16[64, 256])\n# helion: args(x=bf16[128, 512])\n"
    assert hint.fix.range.start.line == decorator and hint.fix.new_text == copied
    assert not any(d.code == "HPL107" for d in rows.diagnostics)  # a compile hint, not a file problem
    # the fix, applied as the editor would, gives a kernel that compiles
    lines = ROWS.splitlines(keepends=True)
    fixed = "".join(lines[:decorator]) + hint.fix.new_text + "".join(lines[decorator:])
    again = compiler.load(fixed).kernels["never_called"]
    assert [format_args(s) for s in again.shape_sets] == ["x=bf16[64, 256]", "x=bf16[128, 512]"]
    assert again.shape_set_origins == [None, None]
    again.compile(emit=False)


def test_the_own_helpers_partial_lambda_constants_and_loops():
    m = compiler.load(HELPERS)
    # a run_example-like helper of the file, a list of kernels, a lambda that swaps its arguments, the
    # module constants ROWS / DTYPE and a loop over WIDTHS
    assert sets(m, "add_rows") == ["x=f32[32, 128], y=f32[32, 128]", "x=f32[32, 256], y=f32[32, 256]"]
    # functools.partial with keywords, a list argument, .t().contiguous()
    assert sets(m, "scale_rows") == ["x=f32[128, 32], factor=2.0, dims=[128]", "x=f32[256, 32], factor=2.0, dims=[256]"]
    assert m.kernels["scale_rows"].shape_set_origins[0].label == f"from `check(128)` at line {line_of(HELPERS, '        check(width)') + 1}"


def test_a_size_computed_from_random_data_is_its_upper_bound_and_says_so():
    m = compiler.load(HELPERS)
    # randint(1, 9) per row for 32 rows, summed by cumsum: at most 256 values
    assert sets(m, "gather_rows") == ["values=f32[256, 128], offsets=i32[33]"]
    (origin,) = m.kernels["gather_rows"].shape_set_origins
    assert origin.notes == (f"256 is the upper bound of a size computed from random data at line "
                            f"{line_of(HELPERS, 'total = int(') + 1}",)


def test_shape_lines_win_over_calls():
    text = HEADER.replace("@helion.kernel()", "# helion: args(x=f32[8, 128])\n@helion.kernel()") + \
        "scale(torch.randn(16, 256))\n"
    m = compiler.load(text)
    assert sets(m, "scale") == ["x=f32[8, 128]"]
    assert m.kernels["scale"].shape_set_origins == [None]


def test_a_notebook_like_module_text_without_main():
    # cells joined in order: calls at module level, a helper defined in one cell and used in a later one
    cells = [HEADER, "SIZES = [64, 128]\n", "def make(n):\n    return torch.ones(n, 128, dtype=torch.bfloat16)\n",
             "for n in SIZES:\n    y = scale(make(n))\n"]
    text = "\n".join(cells)
    m = compiler.load(text)
    assert sets(m, "scale") == ["x=bf16[64, 128]", "x=bf16[128, 128]"]
    assert m.kernels["scale"].shape_set_origins[0].label == \
        f"from `scale(make(n))` at line {line_of(text, 'scale(make(n))') + 1}"


def test_main_is_followed_even_without_a_main_guard_and_unknown_branches_run_both():
    text = HEADER + textwrap.dedent("""\
        import random


        def main():
            big = random.random() > 0.5   # unknown statically: both branches are followed
            if big:
                n = 4096
            else:
                n = 256
            scale(torch.randn(n, 128))
            if random.random() > 0.5:
                scale(torch.randn(8, 128))
            else:
                scale(torch.randn(16, 128))
    """)
    m = compiler.load(text)
    # n is different in the two branches, so the first call's argument is unknown; the others are found
    assert sets(m, "scale") == ["x=f32[8, 128]", "x=f32[16, 128]"]


def test_nothing_in_the_file_runs(tmp_path):
    marks = tmp_path / "marks"
    text = HEADER + textwrap.dedent(f"""\
        import os
        import pathlib
        import subprocess

        MARKS = pathlib.Path({str(marks)!r})


        def main():
            MARKS.mkdir()
            (MARKS / "main").write_text("ran")
            open({str(tmp_path / "opened")!r}, "w").write("ran")
            os.system("touch {tmp_path / 'system'}")
            subprocess.run(["touch", {str(tmp_path / "subprocess")!r}])
            torch.save(torch.zeros(2), {str(tmp_path / "saved.pt")!r})
            scale(torch.randn(8, 128))


        if __name__ == "__main__":
            main()
    """)
    m = compiler.load(text)
    assert sets(m, "scale") == ["x=f32[8, 128]"]
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("body, offending, words", [
    ("def main():\n    x = torch.randn(64, 128)\n    while True:\n        scale(x)\n", "while True", "stopped after"),
    ("def main():\n    scale(torch.randn(2**31, 2**31))\n", "scale(torch.randn(2**31", "limited to 2**40"),
    ("def main():\n    scale(torch.randn(10**40, 4))\n", "torch.randn(10**40", "more than 2**62"),
    ("def main():\n    for i in range(10**11):\n        scale(torch.randn(8, 128))\n", "range(10**11)", "100,000,000,000"),
    ("def main():\n    n = 7**4095**4095\n", "7**4095**4095", "bits"),
    ("def main():\n    for n in range(8, 4096, 8):\n        scale(torch.randn(n, 128))\n", "scale(torch.randn(n",
     "more than 8 different shapes"),
    # 20,000 rows of 60,000 would be ~10 GB: building lists costs steps by their length
    ("def main():\n    rows = []\n    for i in range(20000):\n        rows.append([0] * 60000)\n", "for i in range",
     "stopped after"),
])
def test_hostile_calls_stay_bounded_and_are_said(body, offending, words):
    text = HEADER + body + "\n\nif __name__ == '__main__':\n    main()\n"
    start = time.perf_counter()
    m = compiler.load(text)
    notes = [d for d in m.diagnostics if d.code == "HPL112"]
    assert time.perf_counter() - start < 20  # bounded (the budget ends it in well under a second when idle)
    assert notes and all(d.severity == Severity.WARNING for d in notes), m.diagnostics
    said = [d for d in notes if words in d.message]
    assert said, notes
    if offending is not None:
        assert said[0].range.start.line == line_of(text, offending)
    assert len(m.kernels["scale"].shape_sets) <= 8


def test_infinite_recursion_is_cut_without_a_crash():
    text = HEADER + "def f(n):\n    return f(n + 1)\n\n\ndef main():\n    f(0)\n    scale(torch.randn(8, 128))\n"
    assert sets(compiler.load(text), "scale") == ["x=f32[8, 128]"]


def test_a_call_a_shape_line_cannot_say_is_left_out_and_named_in_the_hint():
    # a function argument is compiled in, but not one that reads a tensor of the function around it
    text = HEADER.replace("def scale(x: torch.Tensor)", "def scale(x: torch.Tensor, fn=None)") + \
        "def main():\n    t = torch.ones(3)\n    scale(torch.randn(8, 128), lambda v: v + t)\n\n\nmain()\n"
    m = compiler.load(text)
    with pytest.raises(compiler.CompileError) as info:
        m.kernels["scale"].compile()
    (hint,) = info.value.diagnostics
    assert hint.severity == Severity.INFORMATION
    assert f"the call at line {line_of(text, 'scale(torch.randn(8, 128), lambda') + 1}: argument `fn` is a function " \
        "reading `t` of the function around it, which is not a number or dtype" in hint.message


def test_int64_and_dtype_arguments_round_trip_through_shape_keys():
    text = HEADER.replace("def scale(x: torch.Tensor)", "def scale(x: torch.Tensor, dt: torch.dtype)") + \
        "scale(torch.zeros(8, 128, dtype=torch.long), torch.bfloat16)\n"
    m = compiler.load(text)
    (specs,) = m.kernels["scale"].shape_sets
    assert specs == {"x": TensorSpec(torch.int64, (8, 128)), "dt": DtypeSpec("bfloat16")}
    assert parse_args_text(format_args(specs)) == specs


def test_a_call_with_the_wrong_rank_is_said_where_the_kernel_unpacks_it_with_the_call():
    text = HEADER.replace("    out = torch.empty_like(x)\n", "    m, n = x.size()\n    out = torch.empty_like(x)\n") + \
        "scale(torch.randn(4, 8, 128))\n"
    kernel = compiler.load(text).kernels["scale"]
    with pytest.raises(compiler.CompileError) as info:
        kernel.compile()
    (diag,) = info.value.diagnostics
    assert diag.code == "HPL105" and "`x` is 3-D in shape set 0 (from `scale(torch.randn(4, 8, 128))`" in diag.message
    assert diag.range.start.line == line_of(text, "m, n = x.size()")
    assert diag.related[0].range.start.line == line_of(text, "scale(torch.randn(4, 8, 128))")


SCALES = (HERE / "scales.py").read_text()


@pytest.fixture(scope="module")
def scales() -> compiler.Module:
    return compiler.load(SCALES, "scales.py")


def test_0d_tensors_passed_as_scales_become_shape_sets(scales):
    """`torch.tensor(0.5)`, `torch.mean(x).to(...)`, `x.abs().max()`, `torch.zeros(())`: 0-d tensors, `f32[]`."""
    assert scales.diagnostics == []
    assert sets(scales, "clamp_scale") == [
        "x=bf16[16, 256], scale=f32[], bound=f32[], eps=1e-06", "x=bf16[16, 256], scale=bf16[], bound=None, eps=1e-06",
        "x=bf16[64, 512], scale=f32[], bound=f32[], eps=1e-06", "x=bf16[64, 512], scale=bf16[], bound=None, eps=1e-06"]
    assert sets(scales, "add_total") == ["x=f32[32, 128], total=f32[]"]
    for specs in scales.kernels["clamp_scale"].shape_sets:
        assert parse_args_text(format_args(specs)) == specs


def test_kernels_reading_and_writing_0d_tensors_match_torch_and_lower(scales):
    clamp = scales.kernels["clamp_scale"]
    for index in range(len(clamp.shape_sets)):
        ck = clamp.compile(shape_set=index)
        assert not [d for d in ck.diagnostics if d.is_error] and ck.check_lowering() == []
    ck = clamp.compile(shape_set=0)
    assert "scale_1d_smem[0]" in ck.source  # element 0 of its [1] view, read on the scalar core
    x = torch.randn(16, 256, dtype=torch.bfloat16)
    bound = torch.mean(x).float()
    torch.testing.assert_close(ck(x, torch.tensor(0.5), bound, 1e-6), (x.float() * (0.5 + 1e-6)).clamp(max=bound))
    add = scales.kernels["add_total"].compile()
    assert add.check_lowering() == []
    x, total = torch.randn(32, 128), torch.tensor(1.5)
    add(x, total)
    torch.testing.assert_close(total, x.sum() + 1.5)


@libtpu
def test_0d_reads_and_writes_pass_the_deviceless_tpu_compile(scales):
    for name in ("clamp_scale", "add_total"):
        ck = scales.kernels[name].compile(shape_set=0)
        assert ck.check_tpu_compile() == [], name


def test_functions_defined_after_a_module_level_if_on_an_unknown_value_are_still_found():
    # both branches of the module-level `if` run; the functions defined below it must stay visible to main()
    text = HEADER + textwrap.dedent("""\
        import os

        block = None
        if os.environ.get("SMALL_BLOCKS") == "1":
            block = 64


        def run_one(n):
            scale(torch.randn(n, 128, dtype=torch.bfloat16))


        def main():
            run_one(32)


        if __name__ == "__main__":
            main()
    """)
    assert sets(compiler.load(text), "scale") == ["x=bf16[32, 128]"]


def test_a_kernel_chosen_by_a_known_condition_gives_the_other_choice_the_calls_too():
    # upstream picks its Pallas variant with `k = a if _get_backend() == "pallas" else b`: the call goes to `a`
    # here, and `b` gets the same arguments (it would get them on another backend), with a note saying so
    text = HEADER + textwrap.dedent("""\
        from helion.runtime.settings import _get_backend


        @helion.kernel()
        def scale_tiled(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            for tile in hl.tile(x.size()):
                out[tile] = x[tile] * 2.0
            return out


        scale_any = scale_tiled if _get_backend() == "pallas" else scale


        def main():
            scale_any(torch.randn(16, 256, dtype=torch.bfloat16))


        main()
    """)
    m = compiler.load(text)
    assert sets(m, "scale_tiled") == sets(m, "scale") == ["x=bf16[16, 256]"]
    assert m.kernels["scale_tiled"].shape_set_origins[0].notes == ()
    line = line_of(text, "scale_any = ") + 1
    assert m.kernels["scale"].shape_set_origins[0].notes == (
        f"a call reaches `scale` only where `_get_backend() == 'pallas'` is false (line {line}); here it goes to "
        "`scale_tiled`",)


def test_the_file_runs_as_a_plain_python_run_without_arguments_or_its_environment_variables():
    # argparse options take their defaults (a string default goes through `type`), os.environ.get its default;
    # the benchmark a name picks is found through globals(); the shape sets say what was assumed
    text = HEADER + textwrap.dedent("""\
        import argparse
        import os

        BENCHMARKS = {"small": "bench_small", "big": "bench_big"}


        def bench_small(rows):
            scale(torch.randn(rows, 128, dtype=torch.bfloat16))


        def bench_big(rows):
            scale(torch.randn(rows * 64, 128, dtype=torch.bfloat16))


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--bench", "-b", action="append", dest="names")
            parser.add_argument("--rows", type=int, default="16")
            parser.add_argument("--verbose", action="store_true")
            args = parser.parse_args()
            names = args.names
            if names is None:
                listed = os.environ.get("MY_BENCHES", "")
                names = listed.split(",") if listed else ["small"]
            for name in names:
                globals()[BENCHMARKS[name]](args.rows if not args.verbose else 1)


        if __name__ == "__main__":
            main()
    """)
    m = compiler.load(text)
    assert sets(m, "scale") == ["x=bf16[16, 128]"]
    parse, env = line_of(text, "args = parser.parse_args()") + 1, line_of(text, "listed = os.environ") + 1
    assert m.kernels["scale"].shape_set_origins[0].notes == (
        f"assuming a plain run: no command-line arguments (line {parse}), environment variable MY_BENCHES unset "
        f"(line {env})",)

    # an argument a plain run does not give makes parse_args() exit: nothing is guessed
    required = text.replace('parser.add_argument("--verbose", action="store_true")', 'parser.add_argument("config")')
    assert sets(compiler.load(required), "scale") == []
