"""One module per LSP request kind; each exposes `register(server)` and keeps its handlers small.

configuration  initialize / settings / watchers / shutdown / helion/stats
diagnostics    open, change, save, close -> staged analysis and publishing
notebooks      the same for Jupyter notebooks: one module of their code cells (cells' URIs via layout.py)
hover          kernel, tensor access and tile-loop hovers (cached results only)
codelens       per shape set lenses from the tuning store and the tuner's state
commands       helion.tune / tuneFile / applyConfig / cancelTuning, tuning progress and notifications
compiler_check the TPU compiler's background check of a finished tuning (crosscheck jobs, lens notes)
generated      helion/generatedCode, helion/kernelAt, helion/tuningResults
code_actions   quick fixes from compiler diagnostics, apply-best-config actions
May import everything in helion_ls below server.py, and compiler's public API.
"""
