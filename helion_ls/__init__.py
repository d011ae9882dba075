"""helion-ls: the language server for Helion kernels targeting TPU Pallas.

Layout (data flows top to bottom; lower modules never import higher ones):
  __main__.py       `helion-ls` / `python -m helion_ls`: arguments, logging, stdio or TCP.
  prespawn.py       the first compile worker, spawned before the server imports anything else.
  handshake.py      `initialize` answered (and messages kept) while the server's imports run.
  early.py          remembered diagnostics of files opened meanwhile, published before the server is built.
  server.py         wiring only: the server object, the parts it owns, feature registration.
  features/         one module per request kind, and what they share; they see the server only as
                    features/host.py's `Host`, never import server.py (see features/__init__.py).
  analysis.py       the staged analysis of a document version and what gets published from it.
  compose.py        a document's published diagnostics (LSP JSON) from every stage's results.
  remembered.py     the analysis cache on disk (compiler.results) seen as the server's stage results.
  documents.py      per-version kernel views, compile keys and the result cache (keyed by normalised source).
  compile_pool.py   first-stage compiles in warm worker processes (compile_worker.py), deduplicated; one
                    that exceeds its time limit costs its worker, never the event loop.
  worker_process.py one child process answering pickled requests, killed and replaced when it fails
                    (worker_loop.py: the child's side).
  transport.py      the wire: framing that resynchronises, an answer to every request, the process's end.
  trust.py          whether tuning may run kernel code (workspace trust, helion.allowCodeExecution).
  lru.py            a small LRU map.
  check_client.py   the lowering / libtpu stages, sent to `check_worker.py` (a separate process).
  tuning.py         background tuning: `compiler.cli tune` subprocesses, progress, cancel, stale.
  standby.py        a warm tuning process (`compiler.tune.standby`) each tuning is a fork of.
  store.py          a cached view of the tuner's results store for code lenses.
  pacing.py         workspace/codeLens/refresh pacing that never starves an editor's lens requests.
  watch.py          watchdog observers for the results store and workspace Python files.
  edits.py          decorator rewrite for applying configs (pure text + ast).
  positions.py      maps positions between two texts of the same (normalised) kernel.
  settings.py       typed options, defaults, validation, per-folder registry.
  layout.py         which client document shows each analysed line: the file, or a notebook's cells.
  lsp.py            conversions between compiler types and lsprotocol types (lsp_json.py: plain JSON).
  monitor.py        event-loop lag and GC pauses (helion/stats).
  warmup.py         a built-in kernel compiled once at start-up (compile and check workers; the server
                    parses it).

Only `compiler`'s public API is used; `compiler` never imports this package, and no user kernel file is
imported or executed in the server process.
"""
