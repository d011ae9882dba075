"""The features: one module per LSP request kind; each exposes `register(server)` and keeps its handlers small.

configuration  initialize / settings / watchers / shutdown / helion/stats
diagnostics    open, change, save, close -> staged analysis and publishing
notebooks      the same for Jupyter notebooks: one module of their code cells (cells' URIs via layout.py)
hover          kernel, tensor access and tile-loop hovers (cached results only)
codelens       per shape set lenses from the tuning store and the tuner's state
commands       helion.tune / tuneFile / applyConfig / cancelTuning, tuning progress and notifications
chip_check     helion.checkOnChip: `helion-pallas check` of a kernel in the chip's line, its verdicts as diagnostics
chip_time      helion.measureOnChip: `helion-pallas measure` of a shape set's current config in the chip's line
compiler_check the TPU compiler's checks of finished tunings told to the client (crosscheck.py queues them)
generated      helion/generatedCode, helion/kernelAt, helion/tuningResults
code_actions   quick fixes from compiler diagnostics, apply-best-config actions

A feature takes the server as a `Host` (host.py) and imports neither server.py (which imports the features
to register them) nor another feature. What features share lives in these modules, which import no feature:
host           the server as features see it: exactly the parts and methods they use
scheduling     (re)starting a document's analysis for its current text
disk_changes   files changed outside the editor: a Python file reanalysed, a tuning store's lenses refreshed
kernels        a request's kernel by name; a unit's current config and tuning store key
lens_results   a tuning's result as the lenses and the message after a tuning show it
offer          whether a tuned best is offered for Apply
apply_plan     what Apply writes for a kernel with several shape sets (one config, or one per shape set)
config_edits   decorator edits writing configs, as the client's workspace edits
vllm_target    kernels with a vLLM configs/<kernel>/ folder: Apply writes the platform file's entry; hover's line
crosscheck     the TPU compiler's check of a finished tuning: when it is queued, what the Best lens says of it
client_commands commands the client runs that lenses and hover links name
fact_hover     hovers from the compiler's facts (hover.py's)
chip_verdicts  what Check on TPU shows: its lens per kernel and its verdicts as diagnostics
chip_time_shown what the kernel hover says of the current config's time on this machine's TPU (or why none)
May import `helion_ls.wire`, `helion_ls.rewrite`, `helion_ls.workers`, `helion_ls.session` (never server.py, handshake.py, early.py), and compiler's public API.
"""
