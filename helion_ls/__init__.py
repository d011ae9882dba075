"""helion-ls: the language server for Helion kernels targeting TPU Pallas.

In the order a request goes through it (imports go the other way: each package imports only those below it,
and no package imports the modules at this level):
  __main__.py   `helion-ls` / `python -m helion_ls`: arguments, logging, stdio or TCP; spawns the first
                compile worker (workers/prespawn.py) before anything heavy is imported.
  handshake.py  `initialize` answered (and the client's messages kept) while the server's imports run.
  early.py      remembered diagnostics of files opened meanwhile, published before the server is built.
  server.py     wiring only: the server object, the parts it owns, feature registration.
  features/     one module per request kind, and what they share; they see the server only as
                features/host.py's `Host`.
  session/      what the server knows: documents, analyses, remembered results, settings, trust, watching.
  workers/      the processes that compile, check and tune, and their lifecycle.
  rewrite/      changes to the user's source: Apply's decorator edit, verified VMEM quick fixes.
  wire/         framing, transport, LSP forms and positions, client documents (layout), refresh pacing.
Each package's docstring lists its modules and what it may import (tests/test_import_direction.py holds it).

Only `compiler`'s public API is used; `compiler` never imports this package, and no user kernel file is
imported or executed in the server process.
"""
