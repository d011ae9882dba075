"""What a compile is about, as plain data: the typed tile IR and everything it is compiled for.

tile_ir.py    the typed tile IR the front end builds (host region, grid loops, device ops, loads, stores)
specs.py      argument specs (`bf16[8, 128]`, literals) as `# helion: args(...)` lines spell them
callables.py  a Python function given as a kernel argument, as a spec (its source and free names)
config.py     Helion's config format (`helion.Config(...)`)
vllm_configs.py  configs as vLLM keeps them: `configs/<kernel>/<platform>.json`, the TPU platform names
tables.py     integer tables a kernel reads as positions, and the values they must hold
chips.py      TPU chip facts (VMEM, clocks, rates, generation limits) every later stage reads
plan.py       the Pallas plan codegen lowers the IR to, which the VMEM report, the model and hovers read

May import only `compiler.support` (and torch, for meta tensors): every stage below reads this package.
"""
