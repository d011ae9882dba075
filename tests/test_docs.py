"""The documentation keeps its promises: every diagnostic code the compiler can emit has an entry in
docs/diagnostics.md whose example gives that code, a published diagnostic links to its entry, every link in the
README and docs/ resolves (files and anchors), and the README stays a front door."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import REPO

import compiler
from compiler import CompileError
from compiler.support.diagnostics import CODES, Diagnostic, Position, Range, Severity
from compiler.tpu.libtpu_compile import libtpu_available
from helion_ls.wire.layout import Layout
from helion_ls.wire.lsp_json import diagnostic_json

REFERENCE = REPO / "docs" / "diagnostics.md"
README_LINES = 300
# entries whose example gives another code, and why: the reference says so in the entry
GIVES_ANOTHER = {
    "HPL110": "HPL105",  # in the table of codes, emitted nowhere: a host error is said by what went wrong
    "HPL111": "HPL102",  # in the table of codes, emitted nowhere: such a tensor is an unknown name
    "HPL500": "HPL205",  # a lane block below 128 is raised for any ordinary 2-D tensor
}
TPU_COMPILER = {"HPL401"}  # found by the real (deviceless) TPU compile: needs libtpu
NO_EXAMPLE = {"HPL203", "HPL302", "HPL400", "HPL402", "HPL900"}  # the TPU compiler's verdicts, compiler bugs


def _emitted_codes() -> set[str]:
    return {code for path in (REPO / "compiler").rglob("*.py")
            for code in re.findall(r"[\"'](HPL\d{3})[\"']", path.read_text())}


def _entries() -> dict[str, str]:
    """code -> the text of its entry."""
    parts = re.split(r"^## (HPL\d{3})\s*$", REFERENCE.read_text(), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _example(entry: str) -> str | None:
    found = re.search(r"```python\n(.*?)```", entry, flags=re.S)
    return found.group(1) if found else None


def test_every_code_the_compiler_can_emit_has_one_entry() -> None:
    emitted = _emitted_codes()
    assert set(CODES) <= emitted and len(emitted) >= 30
    headings = re.findall(r"^## (HPL\d{3})\s*$", REFERENCE.read_text(), flags=re.M)
    assert len(headings) == len(set(headings))
    assert sorted(emitted - set(headings)) == []  # a code without an entry
    assert sorted(set(headings) - emitted) == []  # an entry for a code nothing emits


def test_entries_without_an_example_are_the_ones_that_cannot_have_one() -> None:
    assert {code for code, entry in _entries().items() if _example(entry) is None} == NO_EXAMPLE


def _codes_of(source: str, chip: str, tpu_compiler: bool = False) -> list[str]:
    """Every code compiling `source` gives: the file's, each kernel's hint, each shape set's compile (and, with
    `tpu_compiler`, its Mosaic lowering and libtpu compile)."""
    try:
        module = compiler.load(source)
    except CompileError as exc:
        return [d.code for d in exc.diagnostics]
    codes = [d.code for d in module.diagnostics]
    for kernel in module.kernels.values():
        if kernel.shape_hint is not None:
            codes.append(kernel.shape_hint.code)
        for index in range(len(kernel.shape_sets)):
            try:
                compiled = kernel.compile(shape_set=index, chip=chip)
                codes += [d.code for d in compiled.diagnostics]
                if tpu_compiler:
                    codes += [d.code for d in compiled.check_lowering() + compiled.check_tpu_compile()]
            except CompileError as exc:
                codes += [d.code for d in exc.diagnostics]
    return codes


@pytest.mark.parametrize("code", sorted(set(CODES) - NO_EXAMPLE - TPU_COMPILER))
def test_the_example_of_an_entry_gives_its_code(code: str) -> None:
    example = _example(_entries()[code])
    assert example is not None
    chip = re.search(r"--chip (\w+)", example)
    assert GIVES_ANOTHER.get(code, code) in _codes_of(example, chip.group(1) if chip else "v7x")


@pytest.mark.libtpu
@pytest.mark.skipif(not libtpu_available(), reason="libtpu is not installed")
@pytest.mark.parametrize("code", sorted(TPU_COMPILER))
def test_the_example_of_a_tpu_compiler_entry_gives_its_code(code: str) -> None:
    example = _example(_entries()[code])
    assert example is not None
    chip = re.search(r"--chip (\w+)", example)
    codes = _codes_of(example, chip.group(1) if chip else "v7x", tpu_compiler=True)
    assert code in codes and not any(c.startswith("HPL4") for c in _codes_of(example, "v7x", tpu_compiler=False))


def test_a_published_diagnostic_links_to_its_entry() -> None:
    text = "x = 1\n"
    diag = Diagnostic(Severity.ERROR, Range(Position(0, 0), Position(0, 1)), "HPL300", "out of VMEM")
    _, published = diagnostic_json(diag, Layout.file("file:///k.py", 1, text))
    assert published["codeDescription"]["href"] == f"{REFERENCE.resolve().as_uri()}#hpl300"
    assert "hpl300" in _anchors(REFERENCE)


# -- links ------------------------------------------------------------------------------------------------

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _prose(text: str) -> str:
    """The text outside code blocks and inline code (links there are examples, not links)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M),
                              flags=re.M):
        slug = _slug(heading)
        out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return out


def _broken_links(path: Path) -> list[str]:
    broken = []
    for target in LINK.findall(_prose(path.read_text())):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:: not checked offline
        file_part, _, anchor = target.partition("#")
        where = (path.parent / file_part).resolve() if file_part else path
        if not where.exists():
            broken.append(f"{path.name}: {target} (no such file)")
        elif anchor and where.suffix == ".md" and anchor not in _anchors(where):
            broken.append(f"{path.name}: {target} (no such heading)")
    return broken


def _pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def test_every_link_in_the_readme_and_docs_resolves() -> None:
    assert len(_pages()) >= 8
    assert [b for page in _pages() for b in _broken_links(page)] == []


def test_the_link_check_sees_a_broken_file_an_unknown_heading_and_skips_code(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## What the chip said, and the CPU's verdict\n")
    page = tmp_path / "page.md"
    page.write_text("[a](other.md#what-the-chip-said-and-the-cpus-verdict) [b](gone.md) [c](other.md#nope)\n"
                    "`[d](gone.md)`\n```\n[e](gone.md)\n```\n[f](https://example.com/x)\n")
    assert _broken_links(page) == ["page.md: gone.md (no such file)", "page.md: other.md#nope (no such heading)"]


def test_the_readme_is_a_front_door() -> None:
    """Short, with the picture of the editor and exactly the two commands: the main job and the tests."""
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= README_LINES
    assert "](docs/images/editor.png)" in text and (REPO / "docs" / "images" / "editor.png").stat().st_size > 10_000
    quick = text.split("```bash\n", 1)[1].split("```", 1)[0]
    assert [line.split("#")[0].strip() for line in quick.splitlines() if line.split("#")[0].strip()] == [
        "bash .ci/demo", "bash .ci/run"]
    assert "pytest" in (REPO / ".ci" / "run").read_text() and "examples/" in (REPO / ".ci" / "demo").read_text()
