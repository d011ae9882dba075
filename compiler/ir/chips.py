"""TPU chip facts, in one place. Everything else (VMEM report, codegen limits, model, libtpu) reads them.

Per-TensorCore figures (the unit a Pallas kernel runs on) are jax 0.10.2's own
(`jax._src.pallas.mosaic.tpu_info.get_tpu_info_for_chip`), written out in `_JAX_TPU_INFO` because importing
jax for them cost a cold language server ~0.5 s before its first diagnostics;
tests/test_compiler_chips.py checks the copy against the installed jax. Figures jax does not carry are
listed in `_EXTRA` with their source named beside them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

SIMULATED_CHIPS = ("v5e", "v5p", "v6e")  # libtpu's static LLO profile runs on these only (tune/schedule.py)

MiB = 1024 * 1024
GiB = 1024 * MiB

# name -> (jax ChipVersion value, TensorCores per JAX device, device_kind for the abstract mesh)
_JAX_CHIPS = {
    "v4": ("v4", 2, "TPU v4"),
    "v5e": ("v5e", 1, "TPU v5 lite"),
    "v5p": ("v5p", 2, "TPU v5"),
    "v6e": ("v6e", 1, "TPU v6 lite"),
    "v7x": ("7x", 1, "TPU7x"),
}

# name -> jax 0.10.2 tpu_info.get_tpu_info_for_chip(ChipVersion(version), cores): the fields we use.
_JAX_TPU_INFO = {
    "v4": dict(generation=4, num_lanes=128, num_sublanes=8, mxu_column_size=128, num_mxus=4,
               vmem_capacity_bytes=16 * MiB, mem_bw_bytes_per_second=615_000_000_000,
               bf16_ops_per_second=137_500_000_000_000, int8_ops_per_second=0, fp8_ops_per_second=0),
    "v5e": dict(generation=5, num_lanes=128, num_sublanes=8, mxu_column_size=128, num_mxus=4,
                vmem_capacity_bytes=128 * MiB, mem_bw_bytes_per_second=820_000_000_000,
                bf16_ops_per_second=197_000_000_000_000, int8_ops_per_second=394_000_000_000_000,
                fp8_ops_per_second=0),
    "v5p": dict(generation=5, num_lanes=128, num_sublanes=8, mxu_column_size=128, num_mxus=4,
                vmem_capacity_bytes=64 * MiB, mem_bw_bytes_per_second=1_230_000_000_000,
                bf16_ops_per_second=229_500_000_000_000, int8_ops_per_second=459_000_000_000_000,
                fp8_ops_per_second=0),
    "v6e": dict(generation=6, num_lanes=128, num_sublanes=8, mxu_column_size=256, num_mxus=2,
                vmem_capacity_bytes=128 * MiB, mem_bw_bytes_per_second=1_640_000_000_000,
                bf16_ops_per_second=920_000_000_000_000, int8_ops_per_second=1_840_000_000_000_000,
                fp8_ops_per_second=920_000_000_000_000),
    "v7x": dict(generation=7, num_lanes=128, num_sublanes=8, mxu_column_size=256, num_mxus=2,
                vmem_capacity_bytes=64 * MiB, mem_bw_bytes_per_second=3_700_000_000_000,
                bf16_ops_per_second=1_155_000_000_000_000, int8_ops_per_second=0,
                fp8_ops_per_second=2_300_000_000_000_000),
}

ALIASES = {
    "tpu7x": "v7x",
    "ironwood": "v7x",
    "7x": "v7x",
    "trillium": "v6e",
    "v6": "v6e",
    "v5litepod": "v5e",
    "v5lite": "v5e",
}

# Figures jax's table does not have. Sources:
#  default scoped VMEM: measured with the libtpu 0.0.42.1 deviceless compile (shared/notes/pallas-tpu-on-cpu.md;
#    16 MiB v4/v5e/v5p, 32 MiB v6e; v7x measured ~44 MiB, documented 32 MiB — we plan against the documented 32);
#  max vmem_limit_bytes: v7x accepts at most 65472 KiB (same notes); other chips: their capacity;
#  topology names/kwargs: jax.experimental.topologies.get_topology_desc names that work with libtpu 0.0.42.1;
#  clock: the TensorCore clock, one VLIW bundle per cycle (what turns the TPU compiler's simulated cycles and
#    scheduled bundles into seconds), with its derivation in _CLOCK_SOURCES;
#  hbm: the HBM a kernel's arrays may take, as the libtpu 0.0.42.1 deviceless compile words it for arrays of
#    384 GiB ("exceeds available HBM (15.75G)" on v5e; G is GiB: attention [8, 32, 32768, 256] bf16's four
#    arrays of 4 GiB are "16.00G").
_EXTRA = {
    "v4": dict(default_scoped_vmem=16 * MiB, max_vmem_limit=16 * MiB, topology=("v4:2x2x1", {}), clock=1.049e9,
               hbm=15.25 * GiB),
    "v5e": dict(
        default_scoped_vmem=16 * MiB,
        max_vmem_limit=128 * MiB,
        topology=("v5e:1x1", {"chips_per_host_bounds": (1, 1, 1)}),
        clock=1.503e9,
        hbm=15.75 * GiB,
    ),
    "v5p": dict(
        default_scoped_vmem=16 * MiB, max_vmem_limit=64 * MiB, topology=("v5p:2x2x1", {}), clock=1.751e9,
        hbm=95.74 * GiB,
    ),
    "v6e": dict(
        default_scoped_vmem=32 * MiB,
        max_vmem_limit=128 * MiB,
        topology=("v6e:1x1", {"chips_per_host_bounds": (1, 1, 1)}),
        clock=1.755e9,
        hbm=31.25 * GiB,
    ),
    "v7x": dict(
        default_scoped_vmem=32 * MiB, max_vmem_limit=65472 * 1024, topology=("tpu7x:2x2x1", {}), clock=2.47e9,
        hbm=94.75 * GiB,
    ),
}
_MXU_PEAK = "the bf16 peak (jax tpu_info) over 4 MXUs x 128 x 128 x 2 FLOP per cycle (jax tpu_info's MXU count and size)"
_CLOCK_SOURCES = {
    "v4": _MXU_PEAK,
    "v5e": _MXU_PEAK + "; libtpu's simulated cycles of an MXU-bound matmul agree (131 kFLOP per cycle at full issue)",
    "v5p": _MXU_PEAK,
    "v6e": "libtpu 0.0.42.1's simulated cycles of an MXU-bound bf16 matmul step ((512, 1024, 1024) blocks: 4.295e9 "
           "FLOP in 8,622 cycles at 95 % MXU slot use, 524 kFLOP per cycle at full issue) against the bf16 peak",
    "v7x": "the seed's 8k `unroll` attention (892 TF/s: 9.63 µs per grid step, blocks [2, 512, 2048]) against "
           "libtpu 0.0.42.1's 23,762 scheduled bundles per step: the lowest clock that issues them that fast (no "
           "simulator on v7x; the MXU rate is not the bound there, it takes >= 2 cycles per push at this clock)",
}


@dataclass(frozen=True)
class Chip:
    name: str
    device_kind: str  # what jax.devices()[0].device_kind says on this chip
    generation: int
    vmem_capacity_bytes: int
    default_scoped_vmem_bytes: int
    max_vmem_limit_bytes: int
    hbm_bandwidth: float  # bytes / second, per TensorCore
    hbm_capacity_bytes: int  # what one kernel's arrays may take (libtpu's "available HBM")
    bf16_flops: float  # FLOP / second, per TensorCore
    int8_flops: float  # OP / second with int8 operands; 0 where the MXU has no int8 mode (jax tpu_info)
    fp8_flops: float  # FLOP / second with 8-bit float operands; 0 where the MXU has no fp8 mode
    num_lanes: int
    num_sublanes: int
    mxu_column_size: int
    num_mxus: int
    clock_hz: float  # TensorCore clock: one VLIW bundle per cycle (see _CLOCK_SOURCES)
    tensorcores: int  # TensorCores one JAX device (so one kernel launch) spans: 2 on megacore v4/v5p, else 1
    topology_name: str
    topology_kwargs: dict = field(default_factory=dict, hash=False, compare=False)
    sources: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def ridge(self) -> float:
        """FLOP per byte where the roofline turns from bandwidth- to compute-bound."""
        return self.bf16_flops / self.hbm_bandwidth

    def sublane_tiling(self, itemsize: int) -> int:
        """Rows per (sublanes x 128) tile: 8 for 32-bit, 16 for 16-bit, 32 for 8-bit dtypes."""
        return self.num_sublanes * max(1, 4 // max(1, itemsize))


CHIP_NAMES = tuple(_JAX_CHIPS)


def canonical_name(name: str) -> str:
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in _JAX_CHIPS:
        raise ValueError(f"unknown chip {name!r}; known: {', '.join(CHIP_NAMES)} (aliases: {', '.join(ALIASES)})")
    return key


@cache
def get_chip(name: str) -> Chip:
    """The chip called `name` (or an alias such as 'ironwood')."""
    key = canonical_name(name)
    device_kind = _JAX_CHIPS[key][2]
    info = _JAX_TPU_INFO[key]
    extra = _EXTRA[key]
    topo_name, topo_kwargs = extra["topology"]
    return Chip(
        name=key,
        device_kind=device_kind,
        generation=info["generation"],
        vmem_capacity_bytes=info["vmem_capacity_bytes"],
        default_scoped_vmem_bytes=extra["default_scoped_vmem"],
        max_vmem_limit_bytes=min(extra["max_vmem_limit"], info["vmem_capacity_bytes"]),
        hbm_bandwidth=float(info["mem_bw_bytes_per_second"]),
        hbm_capacity_bytes=int(extra["hbm"]),
        bf16_flops=float(info["bf16_ops_per_second"]),
        int8_flops=float(info["int8_ops_per_second"]),
        fp8_flops=float(info["fp8_ops_per_second"]),
        num_lanes=info["num_lanes"],
        num_sublanes=info["num_sublanes"],
        mxu_column_size=info["mxu_column_size"],
        num_mxus=info["num_mxus"],
        clock_hz=extra["clock"],
        tensorcores=_JAX_CHIPS[key][1],
        topology_name=topo_name,
        topology_kwargs=topo_kwargs,
        sources={
            "vmem_capacity_bytes": "jax 0.10.2 tpu_info",
            "hbm_bandwidth": "jax 0.10.2 tpu_info",
            "hbm_capacity_bytes": "libtpu 0.0.42.1 deviceless compile ('available HBM')",
            "bf16_flops": "jax 0.10.2 tpu_info",
            "int8_flops": "jax 0.10.2 tpu_info",
            "fp8_flops": "jax 0.10.2 tpu_info",
            "default_scoped_vmem_bytes": "libtpu 0.0.42.1 deviceless compile, shared notes",
            "max_vmem_limit_bytes": "libtpu 0.0.42.1 deviceless compile, shared notes",
            "topology_name": "jax.experimental.topologies names accepted by libtpu 0.0.42.1",
            "clock_hz": _CLOCK_SOURCES[key],
            "tensorcores": "jax 0.10.2 TensorCores per device (megacore)",
        },
    )


# 8-bit float storage types Mosaic loads and stores, on every TPU (libtpu 0.0.42.1's deviceless compile of a
# load and a store of each, v4 / v5e / v5p / v6e / v7x, 2026-12-07): float8_e4m3fn and float8_e5m2 compile on
# all; float8_e4m3fnuz and float8_e5m2fnuz on none (a store: "failed to legalize operation
# 'tpu.pack_subelements'"; a load: "Invalid vector type for load").
MOSAIC_FP8 = frozenset({"float8_e4m3fn", "float8_e5m2"})
FP8_NAMES = frozenset({"float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"})


def fp8_problem(dtype_name: str, chip: Chip) -> str | None:
    """Why `chip` cannot hold the 8-bit float `dtype_name` (torch's name), or None when it can."""
    if dtype_name not in FP8_NAMES or dtype_name in MOSAIC_FP8:
        return None
    return (f"TPU {chip.name} cannot hold {dtype_name}: Mosaic neither loads nor stores it (its 8-bit floats are "
            f"{' and '.join(sorted(MOSAIC_FP8))}, the ones vLLM's TPU platform uses)")
