"""compiler/support/syntax.py: the one place the compiler and the server parse Python source."""

import ast

import pytest

from compiler.support import syntax


def _failing_once(monkeypatch, message: str) -> list[int]:
    calls: list[int] = []
    real = ast.parse

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise SystemError(message)
        return real(*args, **kwargs)

    monkeypatch.setattr(syntax.ast, "parse", flaky)
    return calls


def test_a_spurious_recursion_depth_mismatch_is_parsed_again(monkeypatch):
    """CPython 3.11's ast conversion can raise this for a valid source (gh-106905): the parse is redone."""
    calls = _failing_once(monkeypatch, "AST constructor recursion depth mismatch (before=180, after=200)")
    tree = syntax.parse("x = 1\n")
    assert isinstance(tree, ast.Module) and len(calls) == 2


def test_other_system_errors_are_not_retried(monkeypatch):
    calls = _failing_once(monkeypatch, "something else went wrong")
    with pytest.raises(SystemError, match="something else"):
        syntax.parse("x = 1\n")
    assert len(calls) == 1
