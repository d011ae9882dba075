"""The Pallas plan: what the generated code does, as plain data.

Code generation lowers the tile IR to a `KernelPlan` first (grid, BlockSpecs, memory placement, buffer
counts, scratch, inner loops and the work each step does) and then prints it. The VMEM report, the
performance model and the editor's hovers all read this plan, so they describe exactly the code the
user gets — never a second guess at it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..support.diagnostics import Range
from .tables import IndexTable

Memory = Literal["vmem_block", "resident", "hbm", "smem", "dma"]
"""Where an operand lives.
vmem_block: a block of it is DMA'd into VMEM for each outer grid step (top-level BlockSpec pipeline).
resident:   the block spans the whole extent of an inner loop (unroll / fori_loop strategies); the inner loop
            slices it in VMEM.
hbm:        left in HBM (`memory_space=pl.ANY`); a nested `pltpu.emit_pipeline` streams `block_shape` blocks.
smem:       a small table read only one element at a time (`biases[g]`): the whole array in SMEM, where
            dynamic scalar reads are cheap and need no vector alignment.
dma:        left in HBM (`memory_space=pl.ANY`); the kernel copies the rows a gather names into a small VMEM
            buffer (and a scatter's rows back) with `pltpu.make_async_copy` (codegen/dma.py). Its VMEM is
            that buffer (a `dma_buffer` scratch); `block_shape` is one execution's rows, `buffer_count` the
            buffer's slots.
"""


@dataclass(frozen=True)
class Operand:
    name: str  # name of the ref in the generated kernel, e.g. "k_view_ref"
    tensor: str  # the tensor as named in the kernel source, e.g. "k_view"
    kind: Literal["input", "output", "inout"]
    array_shape: tuple[int, ...]
    dtype: str  # numpy/jax dtype name: "bfloat16", "float32", ...
    itemsize: int
    memory: Memory
    block_shape: tuple[int | None, ...]  # None = squeezed dimension (size 1, dropped in the kernel)
    buffer_count: int  # VMEM copies of the block (1 single-buffered, 2 double-buffered, ...)
    grid_axes: tuple[int, ...]  # outer grid axes the block index depends on (a change triggers a DMA)
    inner_loop: int | None  # index into CallPlan.inner_loops of the loop that streams or slices it
    inner_axes: tuple[int, ...]  # array dims the inner loop walks
    index_map: str  # printed index map, e.g. "lambda b, m: (b, 0, 0)"
    ranges: tuple[Range, ...]  # source ranges of every access this operand serves
    arg_slot: int | None = None  # its tensor argument's position among the kernel's tensor arguments
    # (the pallas_load_buffer_count entry it takes, as in upstream Helion); None for allocations
    reads_old: bool = False  # inout only: its old block is copied into VMEM (read-modify-write, partial stores);
    # otherwise its input side stays in HBM, aliased so elements the kernel does not write keep their values

    @property
    def block_elems(self) -> int:
        n = 1
        for d in self.block_shape:
            n *= 1 if d is None else d
        return n

    @property
    def block_dims(self) -> tuple[int, ...]:
        """Block shape as the kernel sees it (squeezed dims dropped)."""
        return tuple(d for d in self.block_shape if d is not None)


@dataclass(frozen=True)
class Scratch:
    name: str
    shape: tuple[int, ...]
    dtype: str
    itemsize: int
    # counter: an SMEM count (an emit_pipeline loop's step, a window store's rows; not VMEM); dma_buffer: [slots,
    # *copy] rows a gather or window load copies in by DMA; dma_staging: [positions, *row] rows a scatter copies
    # out; dma_window_out: [slots, *window] rows a window store copies out; dma_sem: the DMA semaphores those
    # copies signal (not VMEM)
    role: Literal["carried", "counter", "dma_buffer", "dma_staging", "dma_window_out", "dma_sem"]
    range: Range


# LHS blocks shorter than this many (padded) rows are recorded apart in Work: at or above it every chip's MXU
# streams enough rows per weight load to stay busy (ModelConstants.mxu_min_rows is at most this).
SHORT_LHS_ROWS = 128


@dataclass(frozen=True)
class Work:
    """Work of one straight-line region (one outer grid step, or one inner iteration).

    mxu_flops:  2*m*n*k summed over dots, with the dims as written (unpadded).
    mxu_padded: the same with m padded to the sublane tile and n, k to 128 (what the MXU really does).
    vpu_elems:  elementwise vector work in elements, each operand counted on padded (8|16, 128) tiles.
    eup_elems:  transcendental elements (exp, exp2, log, rsqrt, tanh, sigmoid, reciprocal), padded.
    mxu_int8, mxu_fp8: the parts of mxu_padded whose operands are 8-bit integers / 8-bit floats (the MXU
                runs them at other rates than bf16); the rest of mxu_padded is bf16-class (an f32 dot is
                counted as its bf16 passes).
    mxu_short:  the part of mxu_padded from dots whose padded LHS block has fewer than SHORT_LHS_ROWS rows,
    mxu_short_weights: and what one LHS row of those dots costs (2*n*k, padded): the MXU loads each weight
                tile however few rows pass through it, so short dots cost at least a chip's minimum rows.
    lane_reductions: reductions across the 128 lanes one after another in the region (a softmax is two: its max,
                then its sum of what the max feeds): each waits for the previous one's result. Regions added
                together (unrolled iterations, a loop body beside the step's code) run their chains side by side,
                so adding keeps the longer chain, not the sum.
    """

    mxu_flops: float = 0.0
    mxu_padded: float = 0.0
    vpu_elems: float = 0.0
    eup_elems: float = 0.0
    mxu_int8: float = 0.0
    mxu_fp8: float = 0.0
    mxu_short: float = 0.0
    mxu_short_weights: float = 0.0
    lane_reductions: float = 0.0

    def __add__(self, other: Work) -> Work:
        return Work(
            self.mxu_flops + other.mxu_flops,
            self.mxu_padded + other.mxu_padded,
            self.vpu_elems + other.vpu_elems,
            self.eup_elems + other.eup_elems,
            self.mxu_int8 + other.mxu_int8,
            self.mxu_fp8 + other.mxu_fp8,
            self.mxu_short + other.mxu_short,
            self.mxu_short_weights + other.mxu_short_weights,
            max(self.lane_reductions, other.lane_reductions),
        )

    @staticmethod
    def total(works: list[Work]) -> Work:
        """Work() + works[0] + works[1] + ...: the same additions in the same order (so the same floats),
        without a Work for every partial sum (the tuner sums thousands of regions)."""
        a = b = c = d = f = g = h = i = r = 0.0
        for w in works:
            r = max(r, w.lane_reductions)
            a += w.mxu_flops
            b += w.mxu_padded
            c += w.vpu_elems
            d += w.eup_elems
            f += w.mxu_int8
            g += w.mxu_fp8
            h += w.mxu_short
            i += w.mxu_short_weights
        return Work(a, b, c, d, f, g, h, i, r)

    def scaled(self, k: float) -> Work:
        return Work(
            self.mxu_flops * k,
            self.mxu_padded * k,
            self.vpu_elems * k,
            self.eup_elems * k,
            self.mxu_int8 * k,
            self.mxu_fp8 * k,
            self.mxu_short * k,
            self.mxu_short_weights * k,
            self.lane_reductions,
        )


@dataclass(frozen=True)
class InnerLoop:
    index: int
    strategy: Literal["emit_pipeline", "unroll", "fori_loop"]
    extent: int  # elements along the loop's dimension
    block_size: int
    trips: int  # iterations per outer grid step
    range: Range  # the `for tile_n in hl.tile(...)` line
    operands: tuple[str, ...]  # Operand.name streamed or sliced by this loop
    work: Work  # per iteration
    note: str = ""  # bounds computed on the device: how the loop runs (and why not as the config asked)
    carried_elems: float = 0.0  # 32-bit elements of the values one iteration hands the next, tile-padded


@dataclass(frozen=True)
class LoopInfo:
    """For hovers on `hl.tile` / `hl.grid`: what the loop became."""

    range: Range
    kind: Literal["grid", "inner"]
    api: Literal["tile", "grid"]
    extents: tuple[int, ...]
    block_sizes: tuple[int, ...]
    block_size_indices: tuple[int | None, ...]  # position in config block_sizes (None = fixed/hl.grid)
    steps: tuple[int, ...]  # cdiv(extent, block) per dim
    strategy: str  # "grid" for the launch grid, else the inner-loop strategy
    begins: tuple[int, ...] = ()  # where each dim's range starts (hl.tile(begin, end))
    tails: tuple[int, ...] = ()  # elements in each dim's last block when it is partial (masked), else 0
    device_bounds: tuple[bool, ...] = ()  # per dim: are its bounds computed on the device (extent/steps unknown)
    note: str = ""  # InnerLoop.note

    def tail_notes(self) -> list[str]:
        """`masked tail: 1000 = 7×128 + 104` for each dim whose last block is partial."""
        notes = []
        for i, tail in enumerate(self.tails):
            if tail:
                begin = self.begins[i] if i < len(self.begins) else 0
                n = self.extents[i] - begin
                full = (n - tail) // self.block_sizes[i]
                span = f"{n}" if not begin else f"{n} ({begin}..{self.extents[i]})"
                notes.append(f"masked tail: {span} = {full}×{self.block_sizes[i]} + {tail}")
        return notes


@dataclass(frozen=True)
class AccessInfo:
    """For hovers on a tensor access such as `k_view[tile_b, tile_n, :]`."""

    range: Range
    tensor: str
    operand: str  # Operand.name
    is_store: bool
    indexing: str = ""  # how computed positions (gathers, windows, device scalars) are carried out
    call: str = ""  # CallPlan.name of the pallas_call the operand belongs to (operand names repeat across calls)


@dataclass(frozen=True)
class CallPlan:
    """One `pl.pallas_call` (one outermost hl.tile / hl.grid loop)."""

    name: str  # kernel function name in the generated module
    range: Range  # the outermost loop statement
    grid: tuple[int, ...]
    dimension_semantics: tuple[str, ...]
    operands: tuple[Operand, ...]
    scratch: tuple[Scratch, ...]
    inner_loops: tuple[InnerLoop, ...]
    outer_work: Work  # per outer grid step, excluding inner loops
    temporaries_bytes: int  # estimated live compiler temporaries of the largest fused region
    vmem_limit_bytes: int  # what the generated code requests
    # of those temporaries, the table-sized copies one-hot gathers make of the blocks they select from, per gathered
    # tensor: (its name, the access, bytes); the VMEM report names them (codegen/work.py GATHER_TABLE_FACTOR)
    gather_tables: tuple[tuple[str, Range, int], ...] = ()
    # a launch-grid block the TPU cannot tile is read whole: a larger block can need less VMEM (the tuner's
    # VMEM dominance does not hold for this config)
    widened_blocks: bool = False

    @property
    def grid_steps(self) -> int:
        n = 1
        for g in self.grid:
            n *= g
        return n


@dataclass(frozen=True)
class KernelPlan:
    kernel: str
    chip: str
    calls: tuple[CallPlan, ...]
    flops: float  # algorithmic FLOPs of the whole kernel (2*m*n*k per dot, unpadded)
    hbm_bytes: float  # compulsory HBM traffic: every input read once, every output written once
    loops: tuple[LoopInfo, ...] = field(default=())
    accesses: tuple[AccessInfo, ...] = field(default=())
    narrowed: tuple[str, ...] = ()  # int64 tensor arguments read as int32; a call checks their values fit
    tables: tuple[IndexTable, ...] = ()  # integer arguments read as offsets, positions, counts (table_roles.py)
    tree_scans: bool = False  # hl.associative_scan / hl.reduce with a combine function: combined in log2(n) steps
    dot_precisions: frozenset[str] = frozenset()  # plans of the kernel's dots (frontend/dot_precision.py)

    @property
    def chip_rounds_f32(self) -> bool:
        """Does a TPU compute some of this kernel's f32 values less exactly than torch's f32 on a CPU, and than
        interpret mode: transcendentals on its EUP (exp, log, tanh, erf agree to 4-5 digits on a v5e) or f32
        dots as three bf16 passes (about 2**-16 of each product)? A judge of the results must allow for it."""
        works = [c.outer_work for c in self.calls] + [lp.work for c in self.calls for lp in c.inner_loops]
        return "bf16x3" in self.dot_precisions or any(w.eup_elems for w in works)

    def narrowed_note(self) -> str | None:
        """What the kernel does with its int64 arguments, for the kernel hover."""
        if not self.narrowed:
            return None
        names = ", ".join(f"`{n}`" for n in self.narrowed)
        return (f"Int64 {names} {'is' if len(self.narrowed) == 1 else 'are'} read as int32 (TPUs have no 64-bit "
                "vector types); a call checks that every value fits and raises OverflowError if one does not. "
                "Arithmetic on the values is 32-bit; a product or sum of them is refused where 32 bits would "
                "differ from 64.")
