"""Autotuning: find the fastest config of a kernel for given shapes on a given chip.

keys       identity of a tuning problem (normalised source hash, shape key, compiler version)
store      SQLite results store shared by the CLI, the language server and worker processes
executors  run evaluation functions in parallel: in-process, a local process pool, or Ray
search     search strategies over a discrete config space (exhaustive, pattern search)

objective  what tuning ranks by (speed, with a margin against configs over the default scoped VMEM), when a
           better config is worth applying, and the model's resolution below which it is not; the store orders
           by it too
crosscheck model vs the TPU compiler's estimate of the model's picks: agree, or disagree on order or size
evidence   what a figure is, as shown beside it: "measured on TPU v5 lite" or "model estimate for v7x"

These seven import only the standard library, platformdirs, `compiler.ir.config`, `compiler.ir.chips`, and lazily ray and
`compiler.ir.specs` (for shape_key), so store and executor worker processes start fast; they know
nothing about kernels beyond the space protocol `search` documents.

constants    every constant of the performance model, per chip, with its source
model        analytic per-grid-step TPU model of a compiled kernel's plan (estimates for a named chip)
problem      a tuning problem (kernel, shapes, chip) and the process's compiles of it (no torch to import)
evaluators   model / compile (libtpu) / schedule (the TPU compiler's estimate) / tpu (wall clock) evaluators,
             and the functions workers run
warm_gate    what a fresh gate worker runs first (standard library to import)
schedule     the TPU compiler's own estimate: libtpu's simulated cycles (v5e/v5p/v6e) or bundles issued
shrink       reduced argument shapes that keep a config's tile structure, for correctness runs
correctness  the gate: generated code on reduced shapes against the eager reference of the original source
kernel_space a kernel's config space as a search space: one compile per config, model scores, VMEM pruning
refine       the slow evaluator on the model's best candidates (and, for a measurement, the kernel's default)
chip_workers where the tpu evaluator measures: one worker per local chip, or one Ray actor per cluster TPU
driver       one tuning run: search (in-process), refine, verify the winner, store every trial
decorator    the decorator line a tuned config is pasted as (the kernel's other decorator arguments kept)
parallel     several shape sets searched at once in forked copies of the tuning process
verdicts     the gate's verdicts remembered in the analysis cache (compiler.results; no torch to import)
collector    the garbage collector held off while a search or a check makes its many short-lived objects
arguments    the `helion-pallas tune` and `crosscheck` arguments (light: no torch)
command      the `helion-pallas tune` command line (run)
standby      a warm process that runs each `helion-pallas tune` it is sent in a fork (the language server's)
crosscheck_command  the `helion-pallas crosscheck` command line (run)
measure_command  `helion-pallas measure`: one config's time on this machine's TPU, or why not
write_configs  `tune --write-configs`: the bests into vLLM's configs/<kernel>/<platform>.json entries

These import the compiler (`compiler.api` and below); the language server reaches them only through the
`helion-pallas tune` and `crosscheck` subprocesses and the standby process.
"""
