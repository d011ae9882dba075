"""What the server knows: open documents (per-version kernel views and compile keys), the staged analysis of
a document version and the diagnostics composed from it, results remembered on disk, the tuning store as
lenses read it, the settings, workspace trust, and watching files on disk.

  analysis        The staged analysis of one document version, and what gets published from it.
  chip_times      Per-call times measured on this machine's TPU by `helion-pallas measure`, remembered for the
                  session by kernel text, shapes, chip and config (apart from the tuning store).
  compose         What a document's published diagnostics are: the parse's findings plus, per kernel, every
                  stage's result for each of its units, carried to the shown text and labelled with the shape
                  sets they hold for, by the client document showing them (the file, or a notebook's cell: the
                  document's `Layout`).
  documents       What the server knows about each open document: its kernels at a version, and the compile
                  cache.
  file_clock      The clock files are stamped with, so that "written after this moment" can be asked of a
                  file's mtime.
  lru             A small least-recently-used map (results, position maps).
  positions       Map positions between two texts of the same kernel.
  remembered      The server's side of remembered results: `compiler.results.AnalysisCache` read as
                  `StageResult`s of a document's units, and written in the background.
  settings        The "helion" settings section: typed options, defaults and validation.
  store           The tuner's results store as code lenses need it: cached answers, read off the event loop.
  trust           Whether the server may start work that runs the user's code, and if not, why — in words for
                  the user.
  watch           File watching with watchdog: the tuning results store and the workspace's Python files.

May import from helion_ls: `helion_ls.wire`, `helion_ls.rewrite`, `helion_ls.workers`; and `compiler`.
Never imports the modules at helion_ls's top level (server, handshake, early, __main__) nor helion_ls.features.
"""
