"""`Layout`: module positions <-> the client documents showing them (a file, or a notebook's cells)."""

from __future__ import annotations

import pytest
from lsprotocol import types

from compiler.frontend.notebook import notebook_module
from compiler.support.diagnostics import Position, Range
from helion_ls.wire.layout import Layout

CELLS = ["%pip install helion\n!nvidia-smi", "import torch", "def f(x):\n    return x  # é\n"]


def notebook_layout() -> Layout:
    module = notebook_module([(i, f"cell:{i}", text) for i, text in enumerate(CELLS)])
    return Layout.notebook("file:///nb.ipynb", module, {f"cell:{i}": 10 + i for i in range(len(CELLS))})


def pos(line: int, character: int) -> types.Position:
    return types.Position(line=line, character=character)


def test_a_file_is_its_own_single_part():
    layout = Layout.file("file:///a.py", 3, "x = 1\ny = 'é'\n")
    assert layout.range(Range(Position(1, 4), Position(1, 8))) == ("file:///a.py", types.Range(start=pos(1, 4), end=pos(1, 7)))
    assert layout.position("file:///a.py", pos(1, 7)) == Position(1, 8)
    assert layout.position("file:///b.py", pos(0, 0)) is None
    assert layout.part("file:///a.py").version == 3


def test_module_positions_go_to_their_cell_and_back():
    layout = notebook_layout()
    # cell 2's `return x  # é` is module line 4 (cell 0 has 2 lines, cell 1 one line)
    uri, rng = layout.range(Range(Position(4, 4), Position(4, 18)))
    assert uri == "cell:2" and rng == types.Range(start=pos(1, 4), end=pos(1, 17))  # é: 2 UTF-8 bytes, 1 unit
    assert layout.position("cell:2", pos(1, 17)) == Position(4, 18)
    assert layout.position("cell:1", pos(0, 0)) == Position(2, 0)
    assert layout.locate(5) == (layout.part("cell:2"), 2)  # the cell's last (empty) line


def test_a_range_past_its_cell_ends_with_the_cell():
    uri, rng = notebook_layout().range(Range(Position(2, 0), Position(4, 3)))
    assert uri == "cell:1" and rng == types.Range(start=pos(0, 0), end=pos(0, len("import torch")))


def test_nothing_points_into_a_magic():
    """A whole-file diagnostic sits on line 0, the `%pip` line here: it is shown on the first line of code."""
    uri, rng = notebook_layout().range(Range.lines(0))
    assert uri == "cell:1" and rng.start == pos(0, 0)


def test_edits_name_the_cell_and_its_version():
    layout = notebook_layout()
    text = notebook_module([(i, f"cell:{i}", t) for i, t in enumerate(CELLS)]).text
    start = text.index("return")
    part, rng = layout.edit_range(text, start, start + len("return"))
    assert (part.uri, part.version) == ("cell:2", 12) and rng == types.Range(start=pos(1, 4), end=pos(1, 10))
    with pytest.raises(ValueError, match="two cells"):
        layout.edit_range(text, text.index("import"), start)
