"""VMEM: what a compiled kernel keeps in the TPU's vector memory, and what to do when it does not fit (and
whether its arrays fit the chip's HBM at all).

report.py    every buffer of the Pallas plan, padded as the TPU lays it out, against the scoped limit
floor.py     a lower bound of the VMEM any config with given blocks needs, from one trace (the tuner's prune)
verdicts.py  the report as diagnostics: HPL300 (out of VMEM), HPL301, HPL501, on the source that chose them
fixes.py     configs that fit, each checked by compiling it (the code actions of an HPL300)
hbm.py       the kernel's arrays against the chip's HBM (HPL303: no config can fit)

May import `compiler.support`, `compiler.ir`, `compiler.frontend` and `compiler.codegen`; nothing that runs
a kernel or asks a TPU compiler (`compiler.tpu` reads this package, not the other way round).
"""
