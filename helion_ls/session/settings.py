"""The "helion" settings section: typed options, defaults and validation.

The same object arrives as `initializationOptions` and, per workspace folder, from `workspace/configuration`.
A bad value is reported (once per distinct problem, by the server) and replaced by its default, so a typo
in settings.json never stops the server.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from typing import Any

from compiler.ir.chips import canonical_name

from ..workers.machine_tpu import default_chip

EVALUATORS = ("auto", "model", "compile", "schedule", "tpu")
COMPILER_CHECKS = ("auto", "on", "off")
CLIENT_ONLY = ("interpreter",)  # read by the VS Code client; accepted and ignored here
# initializationOptions in which a client describes itself (not settings; read once in initialize):
# clientShowsTuningProgress: true = it shows helion/tuningState itself, so no $/progress per tuning job
# workspaceTrusted: the editor's workspace trust (VS Code's Restricted Mode is false); later changes arrive
#   as helion/didChangeWorkspaceTrust {trusted}
# clientShowsApplyNotice: true = the "applied, not saved yet" notice goes to it as helion/applied {uri,
#   message} (it shows the notice until the file is saved), not as window/showMessage
CLIENT_ANNOUNCEMENTS = ("clientShowsTuningProgress", "workspaceTrusted", "clientShowsApplyNotice")


@dataclass(frozen=True)
class Settings:
    # "auto" (the default): this machine's TPU generation, else v7x (machine_tpu.py); chip_chosen says the
    # user named one
    chip: str = dataclasses.field(default_factory=default_chip)
    chip_chosen: bool = False
    evaluator: str = "auto"  # tpu where the machine has a TPU of the chip (the tuner asks), else model
    executor: str = "local"
    store_path: str | None = None  # None: the tuner's default store in the user cache dir
    max_concurrent_tunings: int = 2
    compile_on_change: bool = False
    debounce_ms: int = 500
    libtpu: bool = True
    tune_budget_seconds: float = 60.0
    tune_max_evals: int | None = None
    allow_code_execution: bool | None = None  # None: follow the editor's workspace trust
    # after a tuning, the TPU compiler's own estimate of the model's best configs (compiler/tune/crosscheck.py):
    # "auto" where libtpu is installed and simulates the chip (v5e, v5p, v6e), "on" on every chip, "off" never
    compiler_check: str = "auto"


_JSON_NAMES = {
    "chip": "chip",
    "evaluator": "evaluator",
    "executor": "executor",
    "storePath": "store_path",
    "maxConcurrentTunings": "max_concurrent_tunings",
    "compileOnChange": "compile_on_change",
    "debounceMs": "debounce_ms",
    "libtpu": "libtpu",
    "tuneBudgetSeconds": "tune_budget_seconds",
    "tuneMaxEvals": "tune_max_evals",
    "allowCodeExecution": "allow_code_execution",
    "compilerCheck": "compiler_check",
}


def _chip(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("must be 'auto' or a chip name such as 'v7x'")
    return "auto" if value.strip().lower() == "auto" else canonical_name(value)


def _evaluator(value: Any) -> str:
    if value not in EVALUATORS:
        raise ValueError(f"must be one of {', '.join(EVALUATORS)}")
    return value


def _compiler_check(value: Any) -> str:
    if value not in COMPILER_CHECKS:
        raise ValueError(f"must be one of {', '.join(COMPILER_CHECKS)}")
    return value


EXECUTOR = re.compile(r"^(local(:[1-9][0-9]*)?|inline|ray(:.+)?)$")  # the client's schema has the same pattern


def _executor(value: Any) -> str:
    """What `helion-pallas tune --executor` accepts: local, local:N, inline, ray, ray:ADDRESS."""
    if not isinstance(value, str) or not EXECUTOR.fullmatch(value):
        raise ValueError("must be 'local', 'local:N', 'inline', 'ray' or 'ray:ADDRESS'")
    return value


def _path(value: Any, base: str | None) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError("must be a path or null")
    path = os.path.expanduser(os.path.expandvars(value))
    if not os.path.isabs(path) and base:
        path = os.path.join(base, path)
    return os.path.normpath(path)


def _int(lo: int, hi: int):
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
            raise ValueError("must be an integer")
        if not lo <= value <= hi:
            raise ValueError(f"must be between {lo} and {hi}")
        return int(value)

    return check


def _optional_int(lo: int, hi: int):
    inner = _int(lo, hi)
    return lambda value: None if value is None else inner(value)


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("must be true or false")
    return value


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 24 * 3600:
        raise ValueError("must be a number of seconds between 0 and 86400")
    return float(value)


_CHECKS = {
    "chip": _chip,
    "evaluator": _evaluator,
    "executor": _executor,
    "max_concurrent_tunings": _int(1, 64),
    "compile_on_change": _bool,
    "debounce_ms": _int(0, 60_000),
    "libtpu": _bool,
    "tune_budget_seconds": _seconds,
    "tune_max_evals": _optional_int(1, 10_000_000),
    "allow_code_execution": lambda value: None if value is None else _bool(value),
    "compiler_check": _compiler_check,
}


def parse_settings(raw: Any, base_dir: str | None = None) -> tuple[Settings, list[str]]:
    """Settings from a client's JSON object, plus one message per problem (the value was replaced by its default).

    Relative `storePath`s are resolved against `base_dir` (the workspace folder).
    """
    if raw is None:
        return Settings(), []
    if not isinstance(raw, dict):
        return Settings(), [f"helion settings must be an object, not {type(raw).__name__}; using defaults"]
    values: dict[str, Any] = {}
    problems: list[str] = []
    defaults = Settings()
    for key, value in raw.items():
        field = _JSON_NAMES.get(key)
        if field is None:
            if key not in CLIENT_ONLY:
                problems.append(f"unknown setting helion.{key} ignored")
            continue
        try:
            values[field] = _path(value, base_dir) if field == "store_path" else _CHECKS[field](value)
        except ValueError as exc:
            default = getattr(defaults, field)
            problems.append(f"helion.{key} = {value!r} {exc}; using the default {_default_text(field, default)}")
    if values.get("chip") == "auto":
        del values["chip"]
    elif "chip" in values:
        values["chip_chosen"] = True
    return dataclasses.replace(defaults, **values), problems


def _default_text(field: str, default: Any) -> str:
    return f"'auto' ({default})" if field == "chip" else repr(default)


class SettingsRegistry:
    """Settings per workspace folder (longest matching folder URI wins), initialization options otherwise.

    Problems are returned only the first time they are seen, so each is reported once per session.
    """

    def __init__(self) -> None:
        self.initial_raw: dict[str, Any] = {}
        self.default = Settings()
        self.folders: dict[str, Settings] = {}
        self._reported: set[str] = set()

    def _new(self, problems: list[str]) -> list[str]:
        fresh = [p for p in problems if p not in self._reported]
        self._reported.update(fresh)
        return fresh

    def set_initial(self, raw: Any, base_dir: str | None = None) -> list[str]:
        self.initial_raw = raw if isinstance(raw, dict) else {}
        self.default, problems = parse_settings(raw, base_dir)
        return self._new(problems)

    def set_folder(self, folder_uri: str, raw: Any, base_dir: str | None) -> list[str]:
        """Folder values override the initialization options key by key."""
        merged = {**self.initial_raw, **raw} if isinstance(raw, dict) else self.initial_raw
        self.folders[folder_uri.rstrip("/")], problems = parse_settings(merged, base_dir)
        return self._new(problems if isinstance(raw, dict) or raw is None else [*problems, _not_object(raw)])

    def for_uri(self, uri: str) -> Settings:
        best = ""
        for folder in self.folders:
            if (uri == folder or uri.startswith(folder + "/")) and len(folder) > len(best):
                best = folder
        return self.folders[best] if best else self.default

    def all(self) -> list[Settings]:
        return [self.default, *self.folders.values()]


def _not_object(raw: Any) -> str:
    return f"helion settings must be an object, not {type(raw).__name__}; using defaults"
