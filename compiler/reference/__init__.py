"""Eager reference: runs the ORIGINAL Helion kernel source with PyTorch, tiles being index ranges.

It exists to catch bugs in the compiler's IR and code generation, so it shares no code with them: it may
import only torch, the standard library, `compiler.ir.specs`, `compiler.ir.config`, `compiler.ir.tables` and
`compiler.support.lifeline`. It executes user code and therefore runs only in test and worker processes, never inside
the language server; tools (check, the tuner's correctness gate) run it through `isolated.ReferenceProcess`,
a separate process with memory and time limits that runs only what the kernel needs.

Modules: `runner` (exec a source, run a kernel), `prune` (the statements one kernel needs), `isolated` (the
resource-limited reference process), `helion_module` (the eager `helion` and its import hook),
`upstream_testing` (the eager `helion._testing`: the constants upstream's examples read), `language` (eager
`helion.language`), `scans` (hl.cumsum/cumprod, hl.associative_scan, also standing in for torch's scan, and hl.reduce), `tiles` (Tile and block-size assignment), `jagged` (hl.jagged_tile's per-lane masks),
`kernel` (the eager kernel object), `matmul_mode` (mixed-precision addmm/baddbmm), `autotuner`
(register_tunable's fragments), `uninitialized` (torch.empty filled as interpret mode fills it), `rewrite`
(subscript keys that accept Tiles), `errors`, `inputs` (random inputs from specs, integer tables drawn as
their kind).
"""

from compiler.reference.errors import ReferenceRunError
from compiler.reference.inputs import make_inputs
from compiler.reference.isolated import ReferenceProcess
from compiler.reference.kernel import EagerKernel
from compiler.reference.runner import ReferenceModule, load_module, run_reference

__all__ = [
    "EagerKernel",
    "ReferenceModule",
    "ReferenceProcess",
    "ReferenceRunError",
    "load_module",
    "make_inputs",
    "run_reference",
]
