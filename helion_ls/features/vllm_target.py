"""Kernels whose tuned configs live where vLLM reads them: a kernel with a `configs/<kernel>/` folder beside
its file (or above it, as vLLM's `helion/ops/` and `helion/configs/`). *Apply* writes the tuned config to the
entry of the shape set's case key (the default entry without one) in the platform file of the chip it was
tuned for, instead of editing the decorator; the kernel hover says which entry vLLM runs it with now. The file
format, platform names and lookup are compiler/ir/vllm_configs.py's."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import to_fs_path

from compiler.ir import vllm_configs as vc
from compiler.ir.config import Config

from ..session.documents import KernelView, Loaded, Unit
from .config_edits import best_configs
from .host import Host
from .scheduling import schedule


@dataclass(frozen=True)
class VllmTarget:
    """Where a shape set's config lives for vLLM on one chip."""

    op_name: str
    platform_file: Path
    case_key: dict[str, Any] | None
    root: Path  # the folder paths are shown relative to (the one holding configs/)

    @property
    def shown_file(self) -> str:
        return os.path.relpath(self.platform_file, self.root)

    @property
    def key_label(self) -> str:
        return f"entry {vc.describe_key(self.case_key)}" if self.case_key else "the default entry"


def case_key(view: KernelView, index: int) -> dict[str, Any] | None:
    """The case key of shape set `index` (from the file's input generator: `ShapeOrigin.case_key`), if any."""
    return vc.case_key_of(view.origin(index))


def target(loaded: Loaded, view: KernelView, unit: Unit, chip: str | None = None) -> VllmTarget | None:
    """The vLLM config entry of `unit` on `chip` (the unit's own by default); None for a kernel without a
    `configs/<kernel>/` folder (a notebook's or an unsaved buffer's have none)."""
    if loaded.notebook is not None:
        return None
    path = to_fs_path(loaded.uri)
    if not path or not os.path.isabs(path):
        return None
    name = vc.op_name(view.kernel.definition.node)
    folder = vc.kernel_configs_dir(path, name)
    if folder is None:
        return None
    return VllmTarget(name, vc.platform_file(folder, chip or unit.key.chip), case_key(view, unit.index),
                      folder.parent.parent)


def write(found: VllmTarget, config: dict[str, Any]) -> str:
    """Write `config` as `found`'s entry; what was done, for the user. Raises OSError or VllmConfigError."""
    created = vc.write_entry(found.platform_file, found.case_key, config)
    made = " (a new file)" if created else ""
    return f"the tuned config to {found.key_label} of {found.shown_file}{made}, where vLLM reads it"


def hover_line(found: VllmTarget) -> str:
    """Which entry of the platform file vLLM runs this shape set with now, by its rule (the case key's entry,
    else the default; no file: the kernel is disabled on this platform)."""
    shown = f"`{found.shown_file}`"
    try:
        entries = vc.read_entries(found.platform_file)
    except (OSError, vc.VllmConfigError) as exc:
        return f"vLLM config: {shown} cannot be read ({exc})"
    if entries is None:
        return f"vLLM config: no TPU config file {shown}: vLLM disables the kernel on this platform"
    entry = vc.find(entries, found.case_key)
    if entry is None:
        return (f"vLLM config: {shown} has no entry for {vc.describe_key(found.case_key)} and no default entry: "
                "vLLM has no config for this case")
    which = "the default entry" if entry.is_default else f"entry {vc.describe_key(entry.key)}"
    line = f"vLLM config: {which} of {shown}: `{Config(entry.config)!r}`"
    if entry.is_default and found.case_key and any(not e.is_default for e in entries):
        line += " (no entry has this case key; the kernel's config_picker may choose another one)"
    return line


async def apply(ls: Host, loaded: Loaded, view: KernelView, arg: dict[str, Any]) -> dict[str, Any] | None:
    """*Apply* for a kernel with a vLLM configs folder: each shape set's config to its own entry (one shape set,
    or all of them with their stored bests); None for a kernel without one (the decorator is edited)."""
    shape_set, chip = arg.get("shapeSet"), arg.get("chip")
    if shape_set is not None or len(view.units) == 1:
        index = shape_set or 0
        if not isinstance(index, int) or not 0 <= index < len(view.units):
            raise JsonRpcInvalidParams(f"{view.name} has no shape set {shape_set!r}")
        units, configs = [view.units[index]], [arg.get("config")]
    else:
        units = list(view.units)
        configs = arg.get("configs") or await best_configs(ls, loaded, view)
    targets = [target(loaded, view, unit, chip) for unit in units]
    if any(t is None for t in targets):
        return None
    chosen: dict[str, tuple[VllmTarget, dict[str, Any]]] = {}  # one config per entry
    for found, config in zip(targets, configs, strict=True):
        if found is None or config is None:
            continue
        entry = vc.case_key_text(found.case_key)
        if entry in chosen and Config(chosen[entry][1]) != Config(config):
            ls.tell_user(f"Shape sets of {view.name} share {found.key_label} of {found.shown_file} and were tuned to "
                         "different configs: apply one shape set's (its Apply lens).", types.MessageType.Warning)
            return {"applied": False}
        chosen[entry] = (found, config)
    done: list[str] = []
    try:
        for found, config in chosen.values():
            done.append(write(found, config))
    except (OSError, vc.VllmConfigError) as exc:
        ls.tell_user(f"Cannot write the tuned config of {view.name}: {exc}", types.MessageType.Error)
    else:
        if not done:
            ls.tell_user(f"No tuned config for {view.name} yet: tune it first.", types.MessageType.Warning)
    if not done:
        return {"applied": False}
    ls.tell_user(f"Applied {'; '.join(done)}.")
    state = ls.analyzer.docs.get(loaded.uri)
    if state is not None:  # the kernel now runs with the written entry: read its units again and compile
        state.loaded, state.force_compile = None, True
        schedule(ls, loaded.uri, compile=True)
    ls.lenses.changed()
    return {"applied": True, "files": sorted({str(t.platform_file) for t in targets if t is not None})}


def actions(loaded: Loaded, view: KernelView, bests: list[dict[str, Any] | None]) -> list[types.CodeAction]:
    """The code actions applying each shape set's stored best (`bests`) to its entry: they run *Apply*."""
    out = []
    for unit, config in zip(view.units, bests, strict=True):
        found = target(loaded, view, unit)
        if config is None or found is None or Config(config) == unit.config:
            continue
        title = (f"Apply tuned config for shape set {unit.index} to {found.key_label} of {found.shown_file}: "
                 f"{Config(config).short()}")
        arg = {"uri": loaded.uri, "kernel": view.name, "shapeSet": unit.index, "config": config}
        out.append(types.CodeAction(title=title, kind=types.CodeActionKind.RefactorRewrite,
                                    command=types.Command(title=title, command="helion.applyConfig", arguments=[arg])))
    return out


def lens_title(loaded: Loaded, view: KernelView, unit: Unit) -> str | None:
    """The Apply lens's title for a kernel whose configs vLLM reads from files (None for another kernel)."""
    found = target(loaded, view, unit)
    return f"Apply to {found.platform_file.name} ({found.key_label})" if found is not None else None
