"""The TPU side: everything that runs a kernel on a chip or asks the TPU's own compiler about one.

runtime.py         run a generated module: on this machine's TPU when it is the chip compiled for, else in
                   TPU interpret mode on the CPU (or Pallas's HLO interpreter, when asked)
interpret_cost.py  whether interpreting a compiled kernel on a CPU finishes in reasonable time, in which mode
truth.py           the lowering and libtpu verdicts of a compiled kernel, mapped back to its source
check_compile.py   the libtpu verdicts `check` asks beside its interpret-mode runs, bounded in time; an
                   unanswered compile is said once per kernel and remembered in a store the caller gives
lowering.py        Pallas -> Mosaic lowering for the TPU platform (jaxlib only, in-process)
mesh.py            an abstract mesh that makes the CPU look like a chosen TPU to jax
local_chips.py     this host's chips as libtpu will see them (no chip opened), and the pin of one worker to one
libtpu_compile.py  the real, deviceless libtpu compile, in a worker process (_libtpu_worker.py); what it
                   compiled, read from its dumps: Mosaic kernel text and op counts (mosaic_dump.py), the
                   schedule (llo_dump.py); mlir_text.py trims errors and reads MLIR locations for both checks

May import `compiler.support`, `compiler.ir` and `compiler.vmem` (a VMEM failure is phrased as the report
does); jax and libtpu load lazily, inside the functions that need them.
"""
