"""Kernels however they are declared (vLLM's register_kernel with helion.Settings, its older bare form, a
second kernel of another's body, a kernel under a module-level `if`, a wrapper of the workspace or named in
pyproject.toml), their shape sets from the file's input generator labelled by case key, and their
autotune_baseline_fn as check's reference. The vLLM-style files are tests/kernels/vllm_style (written for these
tests, in vLLM's style; vLLM itself is not installed: its register_kernel is known by its import path)."""

from __future__ import annotations

import contextlib
import io
import textwrap
from pathlib import Path

import compiler
from compiler import cli
from compiler.check import check_rows

VLLM_STYLE = Path(__file__).parent / "kernels" / "vllm_style"


def test_register_kernel_with_helion_settings_is_a_kernel_with_its_generators_cases():
    module = compiler.load(VLLM_STYLE / "scaled_rows.py")
    kernel = module.kernels["scaled_rows"]
    d = kernel.definition
    assert d.declared_by == "vllm.kernels.helion.register.register_kernel"
    assert (d.input_generator, d.baseline) == ("make_cases", "scaled_rows_reference")
    # backend="cute" is a GPU setting: one note on it, not an error, and not among the kernel's settings
    notes = [x for x in d.diagnostics if x.code == "HPL115"]
    assert len(notes) == 1 and not notes[0].is_error and "cute" in notes[0].message
    assert [kw.arg for kw in d.decorator.keywords] == ["autotune_baseline_fn"]
    # 8 cases; the editor's shape sets are the smallest, a middle and the largest, labelled by case key
    assert len(kernel.all_inferred) == 8
    origins = kernel.shape_set_origins
    assert [o.case_key for o in origins] == [{"width": 256, "rows": 8}, {"width": 256, "rows": 64},
                                             {"width": 512, "rows": 128}]
    assert [o.case_label for o in origins] == ["width=256, rows=8", "width=256, rows=64", "width=512, rows=128"]
    assert str(kernel.shape_sets[2]["x"]) == "f32[128, 512]"
    assert kernel.shape_sets[0]["eps"] == 1e-5
    assert "3 of the 8 cases of `make_cases()`" in kernel.declaration_text
    ck = kernel.compile(chip="v5e", shape_set=1)  # compiles as a helion.kernel of those settings would
    assert dict(ck.args)["x"].shape == (64, 256)


def test_all_or_some_cases_can_be_chosen():
    module = compiler.load(VLLM_STYLE / "scaled_rows.py")
    module.cases = "all"
    assert len(module.kernels["scaled_rows"].shape_sets) == 8
    module = compiler.load(VLLM_STYLE / "scaled_rows.py")
    module.cases = "rows=16, 7"
    labels = [o.case_label for o in module.kernels["scaled_rows"].shape_set_origins]
    assert labels == ["width=256, rows=16", "width=512, rows=16", "width=512, rows=128"]


def test_vllms_older_bare_form_with_a_registered_generator_of_string_keys():
    kernel = compiler.load(VLLM_STYLE / "old_form.py").kernels["scale_rows"]
    assert kernel.definition.input_generator == "cases"
    assert len(kernel.all_inferred) == 4
    assert [o.case_key for o in kernel.shape_set_origins] == ["width_128_rows_8", "width_1024_rows_8",
                                                              "width_1024_rows_32"]
    assert str(kernel.shape_sets[0]["x"]) == "bf16[8, 128]"


def test_another_kernel_of_the_same_body_and_a_kernel_under_an_if():
    module = compiler.load(VLLM_STYLE / "alias_and_branch.py")
    assert set(module.kernels) == {"negate", "negate_static", "square"}
    square = module.kernels["square"]
    assert square.definition.condition == "`_FAST_PATH` is true"
    hint = [d for d in module.diagnostics if d.code == "HPL116"]
    assert len(hint) == 1 and hint[0].range.start.line == square.range.start.line
    assert "defined only where `_FAST_PATH` is true" in square.declaration_text
    assert module.kernels["negate"].definition.condition is None
    square.compile(chip="v5e")
    module.kernels["negate_static"].compile(chip="v5e")


def test_a_workspace_wrapper_that_applies_helion_kernel_is_followed(tmp_path: Path):
    lib = tmp_path / "mylib"
    lib.mkdir()
    (lib / "__init__.py").write_text("from .wrap import tpu_kernel, logged\n")
    (lib / "wrap.py").write_text(textwrap.dedent("""\
        import helion

        def _make(fn, settings):
            return helion.kernel(**settings)(fn)

        def tpu_kernel(**settings):
            def decorate(fn):
                return _make(fn, settings)
            return decorate

        def logged(fn):
            print(fn.__name__)
            return fn
        """))
    (tmp_path / "ops").mkdir()
    path = tmp_path / "ops" / "k.py"
    path.write_text(textwrap.dedent("""\
        import helion.language as hl
        import torch
        from mylib import logged, tpu_kernel

        # helion: args(x=f32[8, 128])
        @tpu_kernel(static_shapes=True)
        def twice(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            for tile in hl.tile(x.shape):
                out[tile] = x[tile] * 2
            return out

        # helion: args(x=f32[8, 128])
        @logged
        def plain(x: torch.Tensor) -> torch.Tensor:
            return x
        """))
    module = compiler.load(path)
    assert list(module.kernels) == ["twice"]
    assert module.kernels["twice"].definition.declared_by == "mylib.tpu_kernel"
    # the same text with no file to look from: nothing says what tpu_kernel does
    assert not compiler.load(path.read_text()).kernels
    # an editor's buffer: the text, and where it is
    assert list(compiler.load(path.read_text(), "k.py", where=str(path)).kernels) == ["twice"]


def test_a_wrapper_named_in_pyproject(tmp_path: Path):
    source = textwrap.dedent("""\
        import helion.language as hl
        import torch
        from corp.kernels import make

        # helion: args(x=f32[8, 128])
        @make("fast")
        def twice(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            for tile in hl.tile(x.shape):
                out[tile] = x[tile] * 2
            return out
        """)
    (tmp_path / "src").mkdir()
    path = tmp_path / "src" / "k.py"
    path.write_text(source)
    assert not compiler.load(path).kernels
    (tmp_path / "pyproject.toml").write_text('[tool.helion-ls]\nkernel-wrappers = ["corp.kernels.make"]\n')
    assert list(compiler.load(path).kernels) == ["twice"]


def test_autotune_baseline_fn_is_the_reference_of_check(tmp_path: Path):
    report = check_rows(str(VLLM_STYLE / "scaled_rows.py"), None, "v5e", ["unroll"])
    assert [(r.eager, r.mine, r.verdict) for r in report.rows] == [("ok", "ok", "ok")]
    wrong = tmp_path / "scaled_rows.py"
    wrong.write_text((VLLM_STYLE / "scaled_rows.py").read_text().replace("out.copy_(x * rms * weight)",
                                                                        "out.copy_(x * rms * weight * 2)"))
    report = check_rows(str(wrong), None, "v5e", ["unroll"])
    assert report.rows[0].eager == "ok" and report.rows[0].mine.startswith("MISMATCH")


def test_a_baseline_that_needs_a_cuda_only_op_is_said_once_and_the_eager_reference_used():
    report = check_rows(str(VLLM_STYLE / "cuda_baseline.py"), None, "v5e", ["unroll"])
    assert [(r.eager, r.mine, r.verdict) for r in report.rows] == [("ok", "-", "ok")]
    notes = [n for n in report.notes if "gpu_baseline" in n]
    assert len(notes) == 1 and "torch.ops._C.gelu_tanh_and_mul" in notes[0] and "eager reference" in notes[0]
    assert report.failures == 0


def test_the_cli_lists_the_kernel_and_its_cases():
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        status = cli.main(["compile", str(VLLM_STYLE / "scaled_rows.py"), "--shape-set", "2", "--chip", "v5e"])
    assert status == 0
    assert "shape set 2 of 3, out=f32[128, 512], x=f32[128, 512], weight=f32[512], eps=1e-05, case width=512, " \
           "rows=128 of make_cases()" in err.getvalue()
    from compiler.check import kernel_summary

    text = kernel_summary(compiler.load(VLLM_STYLE / "scaled_rows.py").kernels["scaled_rows"], checked=1)
    assert "declared with `register_kernel`" in text and "reference: `scaled_rows_reference`" in text
    assert "shape set 1: case width=256, rows=64 of make_cases(): out=f32[64, 256]" in text
