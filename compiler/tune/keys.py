"""What identifies a tuning problem: kernel source (normalised), argument shapes, chip, compiler version.

Stored results are looked up by these keys, so they must change exactly when a result could change:
editing code changes the hash, reformatting or commenting does not, and neither does rewriting the
`config=` of the decorator (which is what applying a tuned config does).
"""

from __future__ import annotations

import ast
import hashlib
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # compiler.specs imports torch; the store (and its worker processes) must stay light
    from ..specs import ArgSpec

# Bump whenever code generation changes in a way that can change a kernel's speed or validity:
# every stored result keyed with an older version is then ignored.
COMPILER_VERSION = "helion-ls-0.1.0/1"

# Decorator keywords that carry tuning output, not kernel semantics.
_CONFIG_KEYWORDS = frozenset({"config", "configs"})


@dataclass(frozen=True)
class TrialKey:
    """The tuning problem a trial belongs to.

    `evaluator` ("model" | "compile" | "tpu") is None in a query key that means "any evaluator".
    """

    source_hash: str
    shape_key: str
    chip: str
    evaluator: str | None = None
    compiler_version: str = COMPILER_VERSION

    def with_evaluator(self, evaluator: str | None) -> TrialKey:
        return replace(self, evaluator=evaluator)


class _Normaliser(ast.NodeTransformer):
    """Drops docstrings and the decorator's config= keywords; everything else is semantics."""

    def _strip_docstring(self, node: ast.AST) -> None:
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]

    def _visit_def(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> ast.AST:
        self._strip_docstring(node)
        for deco in node.decorator_list:
            if isinstance(deco, ast.Call):
                deco.keywords = [kw for kw in deco.keywords if kw.arg not in _CONFIG_KEYWORDS]
        self.generic_visit(node)
        return node

    visit_FunctionDef = _visit_def
    visit_AsyncFunctionDef = _visit_def
    visit_ClassDef = _visit_def

    def visit_Module(self, node: ast.Module) -> ast.AST:
        self._strip_docstring(node)
        self.generic_visit(node)
        return node


def _normalised_dump(source: str) -> str:
    tree = ast.parse(textwrap.dedent(source))
    tree = _Normaliser().visit(tree)
    return ast.dump(tree, annotate_fields=False, include_attributes=False)


def normalized_source_hash(function_sources: Sequence[str]) -> str:
    """sha256 (hex) of the normalised ASTs of a kernel function and the same-file helpers it uses.

    Whitespace, comments, docstrings, positions, the decorator's `config=` and the order in which the
    functions are given do not matter. Raises SyntaxError for a source that does not parse.
    """
    dumps = sorted(_normalised_dump(src) for src in function_sources)
    digest = hashlib.sha256()
    for dump in dumps:
        digest.update(dump.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def shape_key(args: dict[str, ArgSpec]) -> str:
    """Canonical text of a shape set, e.g. `q=bf16[8, 32, 8192, 256], eps=1e-05` (argument order kept)."""
    from ..specs import format_args

    return format_args(args)
