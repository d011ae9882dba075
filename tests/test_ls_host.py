"""Features see the server only as `features.host.Host`: the server has every member Host names, and no
module of features/ imports server.py or a feature (a module with `register`); what features share lives in
modules that import no feature. Imports inside functions count; `if TYPE_CHECKING:` ones do not."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import helion_ls.features
from helion_ls.features.host import Host
from helion_ls.server import create_server

FEATURES = Path(helion_ls.features.__file__).parent


def test_the_server_has_every_member_features_use():
    server = create_server()
    cls = type(server)
    for name in Host.__annotations__:
        assert name in vars(server) or hasattr(cls, name), name
    for name, member in vars(Host).items():
        if name.startswith("_"):
            continue
        if isinstance(member, property):
            assert isinstance(getattr(cls, name, None), property), name
        else:
            theirs = getattr(cls, name)
            assert callable(theirs), name
            assert inspect.iscoroutinefunction(theirs) == inspect.iscoroutinefunction(member), name


def _imports(path: Path) -> set[str]:
    """helion_ls modules `path` imports at run time (relative imports resolved)."""
    package = ["helion_ls", "features"]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)  # `from . import codelens`
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return {m for m in found if m.startswith("helion_ls")}


def test_features_import_neither_the_server_nor_each_other():
    modules = {p.stem: p for p in FEATURES.glob("*.py") if p.stem != "__init__"}
    features = {
        name for name, path in modules.items()
        if any(isinstance(n, ast.FunctionDef) and n.name == "register" for n in ast.parse(path.read_text()).body)
    }
    assert {"configuration", "diagnostics", "codelens", "commands"} <= features
    for name, path in modules.items():
        imported = _imports(path)
        assert "helion_ls.server" not in imported, name
        assert not {f"helion_ls.features.{f}" for f in features} & imported, name
