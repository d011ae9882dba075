"""`Config`: Helion's config format (`helion.Config(block_sizes=[...], pallas_loop_type=...)`).

A read-only mapping that prints with sorted keys exactly as Helion does and keeps the keys of Helion's
other backends, which this compiler ignores, so configs can be pasted between tools (`HELION_KEYS`; a key
outside it is a typo, and `check_keys` says so). Legality against a kernel is checked in `compiler.codegen.space`.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator, Mapping
from typing import Any

from ..support.syntax import parse

LOOP_TYPES = ("emit_pipeline", "unroll", "fori_loop")

# Keys this compiler reads; everything else round-trips untouched.
KNOWN_KEYS = (
    "block_sizes",
    "pallas_loop_type",
    "pallas_load_buffer_count",
    "loop_orders",
    "flatten_loops",
    "pallas_pre_broadcast",
)


# Every key of upstream Helion's Config (helion/runtime/config.py) and of its Pallas backend
# (helion/_compiler/pallas/backend.py): accepted, kept and printed even where this compiler ignores them.
HELION_KEYS = frozenset({
    *KNOWN_KEYS,
    "num_threads", "l2_groupings", "reduction_loops", "range_unroll_factors", "range_warp_specializes",
    "range_num_stages", "range_multi_buffers", "range_flattens", "static_ranges", "load_eviction_policies",
    "load_cache_modifiers", "store_cache_modifiers", "num_warps", "num_stages", "pid_type", "num_sm_multiplier",
    "maxnreg", "indexing", "atomic_indexing", "advanced_controls_file", "epilogue_subtile", "xcd_remap",
    "pallas_worklist_grouping", "pallas_indirect_access_mode",
})


class ConfigError(ValueError):
    """A config that cannot be parsed or has a value of the wrong kind."""


class _FrozenDict(tuple):
    """A dict value made hashable (sorted items); thaws back to a dict."""


def _freeze(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return _FrozenDict(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


def _thaw(value: Any) -> Any:
    """Lists print as lists, like Helion's Config does; dicts stay dicts."""
    if isinstance(value, _FrozenDict):
        return {k: _thaw(v) for k, v in value}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


class Config(Mapping[str, Any]):
    """An immutable Helion config. `Config(block_sizes=[64, 128], pallas_loop_type="unroll")`."""

    __slots__ = ("_items",)

    def __init__(self, mapping: Mapping[str, Any] | None = None, **kwargs: Any):
        items = dict(mapping or {})
        items.update(kwargs)
        for key in items:
            if not isinstance(key, str) or not key.isidentifier():
                raise ConfigError(f"config key {key!r} is not an identifier")
        self._items = {k: _thaw(_freeze(v)) for k, v in sorted(items.items())}

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(tuple((k, _freeze(v)) for k, v in self._items.items()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._items == {k: _thaw(_freeze(v)) for k, v in other.items()}
        return NotImplemented

    def replace(self, **changes: Any) -> Config:
        merged = dict(self._items)
        merged.update(changes)
        return Config(merged)

    def to_json(self) -> dict[str, Any]:
        return dict(self._items)

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={_py_repr(v)}" for k, v in self._items.items())
        return f"helion.Config({body})"

    __str__ = __repr__

    def short(self) -> str:
        """A compact one-line summary for code lenses: `bs=[1,512,512] unroll`."""
        parts = []
        if "block_sizes" in self._items:
            parts.append("bs=[" + ",".join(str(b) for b in self._items["block_sizes"]) + "]")
        loop = self._items.get("pallas_loop_type")
        if loop is not None:
            parts.append(loop if isinstance(loop, str) else "/".join(loop))
        bufs = self._items.get("pallas_load_buffer_count")
        if bufs is not None:
            parts.append("buf=" + (str(bufs) if isinstance(bufs, int) else ",".join(map(str, bufs))))
        return " ".join(parts) or "default"

    @staticmethod
    def parse(text: str) -> Config:
        """Parse JSON (`{"block_sizes": [..]}`) or the printed `helion.Config(...)` form."""
        text = text.strip()
        if not text:
            return Config()
        if text.startswith("{"):
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"config is not valid JSON: {exc.msg} at column {exc.colno}") from None
            if not isinstance(data, dict):
                raise ConfigError("config JSON must be an object")
            return Config(data)
        try:
            node = parse(text, mode="eval").body
        except SyntaxError as exc:
            raise ConfigError(f"config is neither JSON nor helion.Config(...): {exc.msg}") from None
        return config_from_call(node)


def config_from_call(node: ast.expr) -> Config:
    """`helion.Config(a=1, ...)` / `Config(...)` / a dict literal, as an ast node, to a Config."""
    if isinstance(node, ast.Dict):
        try:
            return Config(ast.literal_eval(node))
        except (ValueError, SyntaxError):
            raise ConfigError("config dict must contain only literals") from None
    if not isinstance(node, ast.Call):
        raise ConfigError("expected helion.Config(...)")
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name != "Config":
        raise ConfigError("expected helion.Config(...)")
    if node.args:
        raise ConfigError("helion.Config takes keyword arguments only")
    values: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise ConfigError("**kwargs are not allowed in a config")
        try:
            values[kw.arg] = ast.literal_eval(kw.value)
        except (ValueError, SyntaxError):
            raise ConfigError(f"config value for {kw.arg!r} must be a literal") from None
    return Config(values)


def check_keys(config: Mapping[str, Any]) -> None:
    """Raise ConfigError naming the keys that are not Helion config keys, and listing the valid ones."""
    unknown = sorted(k for k in config if k not in HELION_KEYS)
    if unknown:
        which = ", ".join(repr(k) for k in unknown)
        raise ConfigError(
            f"unknown config key{'s' if len(unknown) > 1 else ''} {which}; valid keys: {', '.join(sorted(HELION_KEYS))}"
        )


def _py_repr(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_py_repr(v) for v in value) + "]"
    return repr(value)


def as_config(value: Config | Mapping[str, Any] | str | None) -> Config:
    if value is None:
        return Config()
    if isinstance(value, Config):
        return value
    if isinstance(value, str):
        return Config.parse(value)
    if isinstance(value, Mapping):
        return Config(value)
    raise ConfigError(f"config must be a Config, a dict or a string, not {type(value).__name__}")
