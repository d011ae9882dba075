"""VMEM: what a compiled kernel keeps in the TPU's vector memory, and what to do when it does not fit.

report.py    every buffer of the Pallas plan, padded as the TPU lays it out, against the scoped limit
floor.py     a lower bound of the VMEM any config with given blocks needs, from one trace (the tuner's prune)
verdicts.py  the report as diagnostics: HPL300 (out of VMEM), HPL301, HPL501, on the source that chose them
fixes.py     configs that fit, each checked by compiling it (the code actions of an HPL300)

May import `compiler.support`, `compiler.ir`, `compiler.frontend` and `compiler.codegen`; nothing that runs
a kernel or asks a TPU compiler (`compiler.tpu` reads this package, not the other way round).
"""
