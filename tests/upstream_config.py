"""What upstream Helion's `Config` accepts, key by key, written from its documentation and its Pallas backend
(helion/runtime/config.py, helion/autotuner/config_spec.py at the snapshot this project follows).

Every config this project writes into a user's file (Apply, the lenses' arguments, quick fixes, the CLI's
decorator line) must pass `problems`: a file we wrote a config into must still run on upstream Helion.
The facts, per key:
- `pallas_loop_type` is one string, "emit_pipeline" | "unroll" | "fori_loop", for every inner loop;
- `pallas_load_buffer_count` is a list of 1s and 2s, one per tensor argument of the kernel; upstream checks
  the length when `pallas_loop_type` is "fori_loop" (and ignores the key otherwise);
- `pallas_pre_broadcast` is a bool, `pallas_worklist_grouping` 0, 1 or 2;
- the backend-neutral keys keep the types of `Config.__init__`'s annotations.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

LOOP_TYPES = ("emit_pipeline", "unroll", "fori_loop")
INDEXING = ("pointer", "tensor_descriptor", "block_ptr")
PID_TYPES = ("flat", "xyz", "persistent_blocked", "persistent_interleaved")


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _list_of(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, list) and all(check(x) for x in v)


def _one_of(*values: Any) -> Callable[[Any], bool]:
    return lambda v: any(v == x and type(v) is type(x) for x in values)


def _optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or check(v)


def _bool(v: Any) -> bool:
    return isinstance(v, bool)


def _str(v: Any) -> bool:
    return isinstance(v, str)


# key -> (documented type, check)
UPSTREAM_KEYS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "block_sizes": ("list[int]", _list_of(_int)),
    "num_threads": ("list[int] | int", lambda v: _int(v) or _list_of(_int)(v)),
    "loop_orders": ("list[list[int]]", _list_of(_list_of(_int))),
    "flatten_loops": ("list[bool]", _list_of(_bool)),
    "l2_groupings": ("list[int]", _list_of(_int)),
    "reduction_loops": ("list[int | None]", _list_of(_optional(_int))),
    "range_unroll_factors": ("list[int]", _list_of(_int)),
    "range_warp_specializes": ("list[bool | None]", _list_of(_optional(_bool))),
    "range_num_stages": ("list[int]", _list_of(_int)),
    "range_multi_buffers": ("list[bool | None]", _list_of(_optional(_bool))),
    "range_flattens": ("list[bool | None]", _list_of(_optional(_bool))),
    "static_ranges": ("list[bool]", _list_of(_bool)),
    "load_eviction_policies": ("list['' | 'first' | 'last']", _list_of(_one_of("", "first", "last"))),
    "load_cache_modifiers": ("list['' | '.cg']", _list_of(_one_of("", ".cg"))),
    "store_cache_modifiers": ("list['' | '.cs' | '.wt']", _list_of(_one_of("", ".cs", ".wt"))),
    "num_warps": ("int", _int),
    "num_stages": ("int", _int),
    "pid_type": ("one of " + ", ".join(PID_TYPES), _one_of(*PID_TYPES)),
    "num_sm_multiplier": ("1 | 2 | 4 | 8", _one_of(1, 2, 4, 8)),
    "maxnreg": ("None | 32 | 64 | 128 | 256", _one_of(None, 32, 64, 128, 256)),
    "indexing": ("one indexing string or a list of them", lambda v: _one_of(*INDEXING)(v) or _list_of(_one_of(*INDEXING))(v)),
    "atomic_indexing": ("one indexing string or a list of them",
                        lambda v: _one_of(*INDEXING)(v) or _list_of(_one_of(*INDEXING))(v)),
    "advanced_controls_file": ("str", _str),
    "epilogue_subtile": ("None | 2 | 4", _one_of(None, 2, 4)),
    "xcd_remap": ("bool", _bool),
    "pallas_loop_type": ("one of " + ", ".join(LOOP_TYPES), _one_of(*LOOP_TYPES)),
    "pallas_load_buffer_count": ("list of 1 | 2, one per tensor argument", _list_of(_one_of(1, 2))),
    "pallas_pre_broadcast": ("bool", _bool),
    "pallas_worklist_grouping": ("0 | 1 | 2", _one_of(0, 1, 2)),
    "pallas_indirect_access_mode": ("str", _str),
}


def problems(config: Mapping[str, Any], tensor_args: int | None = None) -> list[str]:
    """Why upstream Helion would reject `config` (empty when it would not). `tensor_args`: the kernel's
    number of tensor arguments, for the length of `pallas_load_buffer_count` under fori_loop."""
    out = []
    for key, value in config.items():
        if key not in UPSTREAM_KEYS:
            out.append(f"{key!r} is not a key of upstream Helion's Config")
            continue
        documented, check = UPSTREAM_KEYS[key]
        if not check(value):
            out.append(f"{key}={value!r}: upstream takes {documented}")
    bufs = config.get("pallas_load_buffer_count")
    if tensor_args is not None and config.get("pallas_loop_type") == "fori_loop" and bufs is not None:
        if not isinstance(bufs, list) or len(bufs) != tensor_args:
            out.append(f"pallas_load_buffer_count={bufs!r}: with fori_loop upstream wants one entry per tensor "
                       f"argument ({tensor_args})")
    return out
