"""helion-ls: the language server for Helion kernels targeting TPU Pallas.

Layout (data flows top to bottom; lower modules never import higher ones):
  server.py        wiring only: registers LSP features and commands, owns the long-lived parts.
  features/        one module per request kind (diagnostics, hover, codelens, commands, generated, code_actions).
  documents.py     per-document, per-version analysis and the compile cache (off the event loop).
  check_worker.py  the lowering / libtpu stage, in a separate process spoken to over JSON lines.
  tuning.py        background tuning: `compiler.cli tune` subprocesses, progress, cancel, stale.
  store.py         a cached view of the tuner's results store for code lenses.
  watch.py         watchdog observers for the results store and workspace Python files.
  edits.py         decorator rewrite for applying configs (pure text + ast).
  positions.py     maps positions between two texts of the same (normalised) kernel.
  settings.py      typed options, defaults and validation.
  lsp.py           conversions between compiler types and lsprotocol types.

Only `compiler`'s public API is used; `compiler` never imports this package, and no user kernel file is
imported or executed in the server process.
"""
