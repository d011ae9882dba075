"""Code generation: tile IR -> Pallas plan (plan_builder.py) -> standalone module text (emit.py).

exprs.py holds the jnp spelling of each IR op; work.py counts MXU/VPU/EUP work and live temporaries.
May import compiler.ir, compiler.plan, compiler.config, compiler.chips, compiler.diagnostics.
"""
