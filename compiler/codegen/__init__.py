"""Code generation: tile IR -> Pallas plan (plan_builder.py) -> standalone module text (emit.py).

emit.py assembles the module from emit_kernel.py (device kernels) and emit_host.py (the jitted host
function), both built on emit_base.py (names, inlining, source map). loops.py says how each loop runs
(launch-grid order; unroll, fori_loop or emit_pipeline). exprs.py spells each IR op in jax.numpy; work.py
counts MXU/VPU/EUP work and estimates compiler temporaries; padding.py lays arrays out in (sublane, 128)
tiles from their element size (torch-free: the performance model uses it). space.py says which block sizes
Mosaic accepts, the default config and the config space; source_map.py reads a generated module's source
map back.
May import `compiler.support`, `compiler.ir` and `compiler.frontend` (values, ops, index expressions).
"""
