"""Front end: Helion source text -> typed tile IR, statically (the user's file is never imported or run).

module.py finds kernels, imports and `# helion: args(...)` lines; tracer.py evaluates host code abstractly
and lowers device loops to IR; ops.py knows the torch / hl operations. May import compiler.ir,
compiler.diagnostics, compiler.config, compiler.specs; nothing from codegen, checks, tune or helion_ls.
"""
