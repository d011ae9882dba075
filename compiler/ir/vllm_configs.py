"""Tuned configs where vLLM reads them: `configs/<kernel>/<platform>.json`, one file per platform.

vLLM keeps a Helion kernel's tuned configs as a JSON list of `{"key": {case key}, "config": {Helion config}}`
entries, `{"key": {}}` being the default; the platform is the device name lowercased with runs of spaces,
slashes and dashes made `_` (its TPU platform names a chip `TPU <tpu_info chip member>`: a v5e is
`tpu_v5e`). A kernel runs with the entry of its case key, else the default; with no file for the platform
vLLM disables it. Facts and sources: docs/vllm-configs.md.

Writing an entry keeps the rest of the file as it is: the other entries' text, their order and the file's
indentation; only the entry for the case key is replaced or added (never reformatted around it).
"""

from __future__ import annotations

import ast
import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .chips import canonical_name
from .config import Config

# tpu_info's TpuChip member of each chip: vLLM's TPU platform reports `f"TPU {chip_type.name}"`
TPU_INFO_MEMBERS = {"v4": "V4", "v5e": "V5E", "v5p": "V5P", "v6e": "V6E", "v7x": "V7X"}
SEARCH_LEVELS = 3  # configs/ beside the kernel's file or up to this many folders above it (vLLM: ops/ -> ..)


class VllmConfigError(ValueError):
    """A platform file that is not vLLM's format (so it is neither read nor overwritten)."""


def device_name(chip: str) -> str:
    """What vLLM's TPU platform says the device is called on `chip` (`TPU V5E`)."""
    return f"TPU {TPU_INFO_MEMBERS[canonical_name(chip)]}"


def canonical_platform(name: str) -> str:
    """vLLM's platform identifier for a device name: lowercased, runs of spaces, `/` and `-` made `_`."""
    return re.sub(r"[\s/-]+", "_", name.strip().lower())


def platform_name(chip: str) -> str:
    """The platform file's stem for `chip`: `tpu_v5e`, `tpu_v6e`, `tpu_v7x`, ..."""
    return canonical_platform(device_name(chip))


def case_key_text(key: Mapping[str, Any] | None) -> str:
    """A case key's identity as vLLM compares them: compact JSON with sorted keys (`{}` for the default)."""
    return json.dumps(dict(key or {}), sort_keys=True, separators=(",", ":"))


def case_key_of(origin: Any) -> dict[str, Any] | None:
    """The case key of a shape set from its origin (`frontend.call_shapes.ShapeOrigin.case_key`, set for the cases
    of the file's input generator); None for a shape line or a call. A key written as a string is one only in
    CaseKey's own string form (JSON of an object); another string names no entry of vLLM's files (None)."""
    key = getattr(origin, "case_key", None)
    if isinstance(key, str):
        try:
            key = json.loads(key)
        except json.JSONDecodeError:
            return None
    return dict(key) if isinstance(key, Mapping) and key else None


def describe_key(key: Mapping[str, Any] | None) -> str:
    """`hidden_size=4096, num_tokens=128`, or `default entry`."""
    return ", ".join(f"{k}={v}" for k, v in sorted(dict(key or {}).items())) or "default entry"


def op_name(function: ast.FunctionDef) -> str:
    """The kernel's name in vLLM (its configs folder): `@register_kernel("name")` / `op_name="name"` among the
    function's decorators, else the function's name."""
    for decorator in function.decorator_list:
        if not isinstance(decorator, ast.Call):
            continue
        func = decorator.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if called == "register_kernel":
            given = [kw.value for kw in decorator.keywords if kw.arg == "op_name"] + decorator.args[:1]
            if given and isinstance(given[0], ast.Constant) and isinstance(given[0].value, str):
                return given[0].value
    return function.name


def kernel_configs_dir(kernel_file: str | os.PathLike[str], kernel: str) -> Path | None:
    """`configs/<kernel>/` in the kernel file's folder or up to SEARCH_LEVELS folders above it (vLLM keeps
    ops in `helion/ops/` and configs in `helion/configs/`), the nearest first; None when there is none."""
    folder = Path(kernel_file).resolve().parent
    for candidate in [folder, *folder.parents][: SEARCH_LEVELS + 1]:
        found = candidate / "configs" / kernel
        if found.is_dir():
            return found
    return None


def platform_file(configs_dir: Path, chip: str) -> Path:
    return configs_dir / f"{platform_name(chip)}.json"


@dataclass(frozen=True)
class Entry:
    key: dict[str, Any]
    config: dict[str, Any]

    @property
    def is_default(self) -> bool:
        return not self.key


def parse_entries(text: str) -> list[Entry]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise VllmConfigError(f"not valid JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(data, list) or not all(
        isinstance(e, dict) and isinstance(e.get("key"), dict) and isinstance(e.get("config"), dict) for e in data
    ):
        raise VllmConfigError('not a list of {"key": {...}, "config": {...}} entries')
    return [Entry(e["key"], e["config"]) for e in data]


def read_entries(path: Path) -> list[Entry] | None:
    """The file's entries in order; None when there is no file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    return parse_entries(text)


def find(entries: list[Entry], case_key: Mapping[str, Any] | None) -> Entry | None:
    """vLLM's rule: the entry of the case key (the last such, as its dict keeps the last), else the default."""
    wanted = case_key_text(case_key)
    by_key = {case_key_text(e.key): e for e in entries}
    return by_key.get(wanted) or by_key.get(case_key_text({}))


def lookup(path: Path, case_key: Mapping[str, Any] | None) -> Entry | None:
    """The entry vLLM runs a case with from platform file `path`: exact case key, else the default entry;
    None when the file is missing or has neither."""
    entries = read_entries(path)
    return find(entries, case_key) if entries is not None else None


# -- writing ------------------------------------------------------------------------------------------
def _element_spans(text: str) -> tuple[int, int, list[tuple[int, int]]]:
    """The top-level array's `[` and `]` offsets and each element's (start, end) in `text` (valid JSON)."""
    depth, in_string, escaped = 0, False, False
    open_at, spans, start = -1, [], -1
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
            if depth == 1 and start < 0:
                start = i
        elif ch in "[{":
            if depth == 0:
                open_at = i
            elif depth == 1 and start < 0:
                start = i
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth == 1 and start >= 0:
                spans.append((start, i + 1))
                start = -1
            elif depth == 0:
                return open_at, i, spans
    raise VllmConfigError("unterminated JSON array")


def _line_indent(text: str, at: int) -> str | None:
    """The whitespace before offset `at` on its line, when only whitespace precedes it there."""
    line_start = text.rfind("\n", 0, at) + 1
    before = text[line_start:at]
    return before if before.strip() == "" and line_start > 0 else None


def _inner_unit(text: str, span: tuple[int, int], outer: str) -> str | None:
    """One indentation step inside an element (`  `), read off its second line; None for a one-line one."""
    newline = text.find("\n", span[0], span[1])
    if newline < 0:
        return None
    line = text[newline + 1 : span[1]]
    indent = line[: len(line) - len(line.lstrip(" \t"))]
    return indent[len(outer) :] if indent.startswith(outer) and len(indent) > len(outer) else None


def _entry_text(entry: dict[str, Any], outer: str | None, unit: str | None) -> str:
    if unit is None:
        return json.dumps(entry)
    return json.dumps(entry, indent=unit).replace("\n", "\n" + (outer or ""))


def _new_entry(case_key: Mapping[str, Any] | None, config: Mapping[str, Any]) -> dict[str, Any]:
    return {"key": dict(sorted(dict(case_key or {}).items())), "config": Config(config).to_json()}


def updated_text(text: str | None, case_key: Mapping[str, Any] | None, config: Mapping[str, Any]) -> str:
    """The platform file's text with the entry for `case_key` set to `config` (replaced where the key has
    an entry, the last one being vLLM's, else added at the end); everything else as it was. `text` None:
    a new file, formatted as vLLM writes them (two-space indent, newline at the end)."""
    entry = _new_entry(case_key, config)
    if text is None or not text.strip():
        return json.dumps([entry], indent=2) + "\n"
    entries = parse_entries(text)
    open_at, close_at, spans = _element_spans(text)
    if not spans:
        inner = _entry_text(entry, "  ", "  ")
        return text[: open_at + 1] + "\n  " + inner + "\n" + text[close_at:]
    wanted = case_key_text(case_key)
    matches = [i for i, e in enumerate(entries) if case_key_text(e.key) == wanted]
    at = matches[-1] if matches else len(spans) - 1
    if matches:
        entry["key"] = entries[at].key  # the key as the file spells it
    outer = _line_indent(text, spans[at][0])
    new = _entry_text(entry, outer, _inner_unit(text, spans[at], outer or ""))
    if matches:
        start, end = spans[at]
        return text[:start] + new + text[end:]
    if len(spans) > 1:
        separator = text[spans[-2][1] : spans[-1][0]]
    else:
        separator = ",\n" + outer if outer is not None else ", "
    end = spans[-1][1]
    return text[:end] + separator + new + text[end:]


def write_entry(path: str | os.PathLike[str], case_key: Mapping[str, Any] | None, config: Mapping[str, Any]) -> bool:
    """Set the entry for `case_key` in platform file `path` (folders and file made when absent), written
    whole or not at all; True when the file was new. Raises VllmConfigError for a file not in vLLM's format."""
    path = Path(path)
    try:
        text: str | None = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = None
    new_text = updated_text(text, case_key, config)
    path.parent.mkdir(parents=True, exist_ok=True)
    if text is None:
        with open(path, "x", encoding="utf-8", newline="") as out:
            out.write(new_text)
        return True
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(new_text)
        os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)  # readers see the old file or the new one, never half of it
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return False
