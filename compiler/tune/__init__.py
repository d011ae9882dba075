"""Autotuning: find the fastest config of a kernel for given shapes on a given chip.

keys       identity of a tuning problem (normalised source hash, shape key, compiler version)
store      SQLite results store shared by the CLI, the language server and worker processes
executors  run evaluation functions in parallel: in-process, a local process pool, or Ray
search     search strategies over a discrete config space (exhaustive, pattern search)

These four import only the standard library, platformdirs, and lazily ray and `compiler.specs` (torch,
for shape_key), so store and executor worker processes start fast; they know nothing about kernels
beyond the space protocol `search` documents.
"""
