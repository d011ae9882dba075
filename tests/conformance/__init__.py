"""The conformance suite: small Helion kernels, one per file under `kernels/`, each with its expected value
computed by plain torch (`reference`), compiled and run for every loop strategy that applies.

`case` loads a case file without running any Helion (a stub `helion` module), `runner` compiles, runs,
compares and prints the table; `python -m tests.conformance` is the command line. Imports: the compiler's
public API (`compiler.load`, `Kernel.compile`, `CompileError`) and `compiler.reference.make_inputs` for
random inputs only; expected values never come from the compiler or its eager reference.
"""
