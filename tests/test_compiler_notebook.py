"""Jupyter notebooks as modules (compiler/frontend/notebook.py) and `helion-pallas compile/check/tune` on an .ipynb."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import compiler
from compiler.frontend.notebook import MAX_CELL_CHARS, NotebookError, notebook_module, read_notebook
from compiler.support.diagnostics import Position

NOTEBOOK = Path(__file__).resolve().parent / "notebooks" / "row_kernels.ipynb"


def cells_of(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def write_notebook(path: Path, cells: list[tuple[str, str]]) -> Path:
    doc = {
        "cells": [
            {"cell_type": kind, "id": f"c{i}", "metadata": {}, "source": text.splitlines(keepends=True),
             **({"outputs": [], "execution_count": None} if kind == "code" else {})}
            for i, (kind, text) in enumerate(cells)
        ],
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(doc))
    return path


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compiler.cli", *args], capture_output=True, text=True, timeout=600)


def test_code_cells_make_one_module_line_for_line():
    nb = read_notebook(NOTEBOOK.read_text())
    sources = {c["id"]: "".join(c["source"]) for c in cells_of(NOTEBOOK)}
    code = [c for c in cells_of(NOTEBOOK) if c["cell_type"] == "code"]
    assert [cell.key for cell in nb.cells] == [c["id"] for c in code]
    lines = nb.text.splitlines()
    for cell in nb.cells:
        own = sources[cell.key].splitlines()
        assert cell.line_count == len(own)
        for i, text in enumerate(own):  # each module line is its cell's line, or blanked where IPython's
            module_line = cell.first_line + i
            assert lines[module_line] == text or module_line in nb.blanked
            assert nb.locate(module_line) == (cell, i)
    blanked_text = {sources[nb.locate(line)[0].key].splitlines()[nb.locate(line)[1]] for line in nb.blanked}
    assert blanked_text == {'%pip install -q "torch>=2.8" helion', "!nvidia-smi -L", "%%timeit", "check(512, 1024)",
                            "    %time check(256, 2048)"}
    assert "    pass" in lines  # an indented magic keeps its block valid
    assert nb.diagnostics == ()
    # Cells are counted among all cells (markdown included), from 1, for people.
    row_sum = next(cell for cell in nb.cells if cell.key == "a6")
    assert nb.describe(Position(row_sum.first_line + 8, 4)) == "cell 6:9:5"


@pytest.mark.parametrize("text,kept", [
    ('s = ("%d items"\n     % n)\n', True),  # a `%` continuing a bracket is Python
    ('doc = """\n%not a magic\n"""\n', True),  # a line of a string
    ("y = a \\\n% b\n", True),  # after a backslash
    ("files = !ls\n", False),
    ("t = %timeit -o f()\n", False),
    ("row_sum?\n", False),
    ("??row_sum\n", False),
    ("if True:\n    !ls\n", False),
])
def test_what_counts_as_ipython_syntax(text: str, kept: bool):
    nb = notebook_module([(0, None, text)])
    assert nb.diagnostics == ()
    assert (nb.text.rstrip("\n") == text.rstrip("\n")) is kept, nb.text
    assert nb.cells[0].line_count == text.count("\n") + 1  # lines as an editor counts them
    compiler.parse_python(nb.text)


def test_a_cell_that_does_not_parse_is_blanked_and_diagnosed_on_its_line(tmp_path: Path):
    kernel = "".join(next(c for c in cells_of(NOTEBOOK) if c.get("id") == "a4")["source"])
    path = write_notebook(tmp_path / "broken.ipynb", [
        ("code", "import torch\nimport helion\nimport helion.language as hl"),
        ("markdown", "Notes"),
        ("code", "values = [1, 2,\nprint(values"),
        ("code", kernel),
    ])
    module = compiler.load(path)
    assert list(module.kernels) == ["row_softmax"]  # the broken cell does not hide the next one's kernel
    [diag] = [d for d in module.diagnostics if d.code == "HPL100"]
    assert module.describe(diag.range.start, "broken.ipynb").startswith("broken.ipynb:cell 3:")
    res = run("compile", str(path), "--emit", "vmem")
    assert "-> fits" in res.stdout, res.stderr  # the kernel compiles, and the broken cell is an error
    assert res.returncode == 1 and "broken.ipynb:cell 3:" in res.stderr and "HPL100" in res.stderr


@pytest.mark.parametrize("text,message", [
    ("{not json", "not JSON"),
    ('{"cells": [], "nbformat": 3}', "nbformat 3"),
    ('{"worksheets": []}', "no 'cells'"),
])
def test_files_that_are_not_notebooks_are_one_clear_error(tmp_path: Path, text: str, message: str):
    with pytest.raises(NotebookError, match=message):
        read_notebook(text)
    path = tmp_path / "bad.ipynb"
    path.write_text(text)
    [diag] = compiler.load(path).diagnostics
    assert diag.code == "HPL100" and message in diag.message


def test_a_notebook_in_another_language_has_no_python():
    text = json.dumps({"cells": [{"cell_type": "code", "source": "x <- 1"}], "nbformat": 4,
                       "metadata": {"kernelspec": {"language": "R"}}})
    assert read_notebook(text).text == ""


def test_compile_a_notebook_and_report_positions_as_cell_and_line(tmp_path: Path):
    res = run("compile", str(NOTEBOOK), "-k", "row_sum")
    assert res.returncode == 0, res.stderr
    assert "pltpu" in res.stdout and "row_kernels.ipynb" in res.stdout
    (tmp_path / "bad.ipynb").write_text("{not json")
    res = run("compile", str(tmp_path / "bad.ipynb"))
    assert res.returncode == 1 and "bad.ipynb:1:1: error HPL100: not a Jupyter notebook" in res.stderr
    cells = [(c["cell_type"], "".join(c["source"])) for c in cells_of(NOTEBOOK)]
    cells[5] = ("code", cells[5][1].replace("x[tile_r, tile_c]", "x_typo[tile_r, tile_c]"))
    path = write_notebook(tmp_path / "typo.ipynb", cells)
    res = run("compile", str(path), "-k", "row_sum")
    line = cells[5][1].splitlines().index("            acc = acc + x_typo[tile_r, tile_c].sum(dim=1)") + 1
    assert res.returncode == 1 and f"typo.ipynb:cell 6:{line}:" in res.stderr, res.stderr


def test_tune_and_check_a_notebook(tmp_path: Path):
    res = run("tune", str(NOTEBOOK), "-k", "row_sum", "--max-evals", "4", "--json", "--store", str(tmp_path / "s.db"))
    assert res.returncode == 0, res.stderr[-2000:]
    result = json.loads(res.stdout)
    assert result["kernel"] == "row_sum" and result["best"]["config"]["block_sizes"]
    assert result["best"]["correctness"]["verdict"] == "ok", result["best"]
    res = run("check", str(NOTEBOOK), "-k", "row_sum", "--loop-types", "unroll")
    assert res.returncode == 0 and "1 passed, 0 failed" in res.stdout, res.stdout + res.stderr


def test_cells_past_the_bounds_are_kept_as_written():
    """An editor rebuilds the module at each edit: a cell too large to check is taken as it is (the compiler's
    parse of the module then speaks for it), the others are still read."""
    huge = "\n".join(["!echo hi", "x = 1"] * (MAX_CELL_CHARS // 10))
    nb = notebook_module([(0, None, "%pip install helion"), (1, None, huge)])
    assert nb.blanked == {0} and nb.cells[1].line_count == huge.count("\n") + 1
    assert nb.text.split("\n")[1] == "!echo hi"


def test_odd_cell_sources_read_as_text():
    doc = {"cells": [{"cell_type": "code", "source": [1, "x = 1"]}, {"cell_type": "code", "source": None},
                     {"cell_type": "code"}, "not a cell"], "nbformat": 4}
    nb = read_notebook(json.dumps(doc))
    assert nb.text.split("\n")[:3] == ["x = 1", "", ""] and len(nb.cells) == 3


def test_shapes_from_calls_in_later_cells_are_named_by_cell(tmp_path: Path):
    """Without a shape line, a kernel's shapes come from the notebook's calls (main() calls check(512, 1024) in
    cell 9); the `%%timeit` cell and the `%time` line in main() are not Python and give none."""
    cells = [(c["cell_type"], "".join(c["source"])) for c in cells_of(NOTEBOOK)]
    cells[5] = ("code", cells[5][1].replace("# helion: args(x=f32[256, 2048])\n", ""))
    path = write_notebook(tmp_path / "calls.ipynb", cells)
    kernel = compiler.load(path).kernels["row_sum"]
    line = cells[8][1].splitlines().index("    check(512, 1024)") + 1
    assert [str(s["x"]) for s in kernel.shape_sets] == ["f32[512, 1024]"]
    assert kernel.shape_set_origins[0].label == f"from `check(512, 1024)` at cell 9:{line}"
    res = run("compile", str(path), "-k", "row_sum", "--emit", "vmem")
    assert res.returncode == 0 and f"from check(512, 1024) at cell 9:{line}" in res.stderr, res.stderr
