"""The house keeps its shape: the compiler's stage packages import one way (each only from the stages before
it), nothing imports in a circle (imports inside functions count, `if TYPE_CHECKING:` ones do not; language
server features import neither the server nor each other), compiler/'s top level stays small and no module passes 600 lines.

grimp reads the imports statically, so a new cycle or a stage importing one after it fails here, on CI."""

from __future__ import annotations

import ast
from pathlib import Path

import grimp
import pytest
from conftest import REPO

# Each stage package and the stages it may import. A stage reads only what comes before it on the data's way
# through the compiler: source -> frontend -> IR -> codegen -> VMEM -> the TPU's verdicts.
STAGES = {
    "compiler.support": set(),
    "compiler.ir": {"compiler.support"},
    "compiler.frontend": {"compiler.support", "compiler.ir"},
    "compiler.codegen": {"compiler.support", "compiler.ir", "compiler.frontend"},
    "compiler.vmem": {"compiler.support", "compiler.ir", "compiler.frontend", "compiler.codegen"},
    "compiler.tpu": {"compiler.support", "compiler.ir", "compiler.vmem"},
    # the eager reference shares no code with the compiler it checks: argument specs, configs, tables only
    "compiler.reference": {"compiler.support", "compiler.ir"},
}
MAX_TOP_LEVEL = 8
MAX_LINES = 600


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("compiler", "helion_ls", exclude_type_checking_imports=True, cache_dir=None)


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_module_imports_in_a_circle(graph) -> None:
    assert _cycles(graph) == []


# the compiler's top level: the public face and what it calls; nothing may circle back to it, not even at type level
TOP_OF_THE_COMPILER = {"compiler.api", "compiler.pipeline", "compiler.compiled", "compiler.tpu.truth"}


def test_no_circle_at_type_level_in_the_language_server_or_through_the_compiler_top() -> None:
    """`if TYPE_CHECKING:` imports count here: a reader following annotations never goes round in a circle in
    helion_ls, nor through the compiler's public face. (The front end's hubs, Tracer and the host evaluator,
    are a circle at type level on purpose: compiler/frontend/__init__.py says why.)"""
    typed = grimp.build_graph("compiler", "helion_ls", exclude_type_checking_imports=False, cache_dir=None)
    wrong = [c for c in _cycles(typed) if any(m.startswith("helion_ls") or m in TOP_OF_THE_COMPILER for m in c)]
    assert wrong == []


def test_the_cycle_finder_sees_a_circle() -> None:
    class Two:
        modules = {"a", "b", "c"}

        @staticmethod
        def find_modules_directly_imported_by(module: str) -> set[str]:
            return {"a": {"b"}, "b": {"a", "c"}, "c": set()}[module]

    assert _cycles(Two()) == [["a", "b"]]  # type: ignore[arg-type]


def test_each_stage_imports_only_the_stages_before_it(graph) -> None:
    wrong = []
    for module in sorted(graph.modules):
        stage = _package(module)
        if stage not in STAGES:
            continue
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            target = _package(imported)
            if target != stage and (target.startswith("compiler") or target.startswith("helion_ls")) \
                    and target not in STAGES[stage]:
                wrong.append(f"{module} imports {imported}")
    assert wrong == []


def test_the_compiler_never_imports_the_language_server(graph) -> None:
    assert [m for m in graph.modules if m.startswith("compiler")
            and any(i.startswith("helion_ls") for i in graph.find_modules_directly_imported_by(m))] == []


def test_language_server_features_import_neither_the_server_nor_each_other(graph) -> None:
    """A feature (a module of helion_ls/features with `register`) reaches the server through features/host.py's
    protocol; what features share lives in modules of that package that import no feature."""
    import helion_ls.features

    package = Path(helion_ls.features.__file__).parent
    features = {f"helion_ls.features.{path.stem}" for path in package.glob("*.py")
                if any(isinstance(node, ast.FunctionDef) and node.name == "register"
                       for node in ast.parse(path.read_text()).body)}
    assert {"helion_ls.features.configuration", "helion_ls.features.codelens"} <= features
    wrong = [f"{module} imports {imported}" for module in sorted(graph.modules)
             if module.startswith("helion_ls.features.")
             for imported in sorted(graph.find_modules_directly_imported_by(module))
             if imported == "helion_ls.server" or imported in features]
    assert wrong == []


def test_the_compiler_top_level_is_small_and_modules_are_short() -> None:
    top = sorted(p.name for p in (REPO / "compiler").glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL, top
    long = [f"{p.relative_to(REPO)}: {n}" for base in ("compiler", "helion_ls")
            for p in sorted((REPO / base).rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert long == []


def test_every_package_says_what_lives_there_and_what_it_may_import() -> None:
    packages = [p for base in ("compiler", "helion_ls") for p in (REPO / base).rglob("__init__.py")]
    undocumented = [str(p.relative_to(REPO)) for p in packages if "import" not in _docstring(p)]
    assert undocumented == []


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())) or ""


# -- helion_ls: its stage packages (written by restructure_ls.py) --
# Each package and the helion_ls packages it may import: a request comes in over the wire, a feature answers
# it from the session, which asks the workers; imports go the other way. Modules at helion_ls's top level
# (__main__, handshake, early, server) may import every package; no package imports them.
LS_STAGES = {
    "helion_ls.wire": set(),
    "helion_ls.rewrite": set(),
    "helion_ls.workers": {"helion_ls.rewrite"},
    "helion_ls.session": {"helion_ls.wire", "helion_ls.rewrite", "helion_ls.workers"},
    "helion_ls.features": {"helion_ls.wire", "helion_ls.rewrite", "helion_ls.workers", "helion_ls.session"},
}
LS_MAX_TOP_LEVEL = 8


def test_each_language_server_package_imports_only_those_below_it(graph) -> None:
    wrong = []
    for module in sorted(m for m in graph.modules if m.startswith("helion_ls.")):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            source, target = _package(module), _package(imported)
            if not imported.startswith("helion_ls.") or source == target or source not in LS_STAGES:
                continue
            if target not in LS_STAGES[source]:
                wrong.append(f"{module} imports {imported}")
    assert wrong == []


def test_the_language_server_top_level_is_small() -> None:
    top = sorted(p.name for p in (REPO / "helion_ls").glob("*.py"))
    packages = sorted(p.parent.name for p in (REPO / "helion_ls").glob("*/__init__.py"))
    assert len(top) <= LS_MAX_TOP_LEVEL, top
    assert sorted(f"helion_ls.{p}" for p in packages) == sorted(LS_STAGES)
