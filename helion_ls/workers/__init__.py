"""The processes that compile, check and tune, and their lifecycle. The compile pool's warm workers (the
first one spawned before the server imports anything), the check worker (Mosaic lowering, libtpu), the
tuner's subprocesses and its warm standby; the child side of each (worker_loop, compile_worker,
check_worker), the built-in warm-up kernel, and the foreground gate that keeps background work waiting
while a tuning the user started runs. A crash or a hang here costs a process, never the event loop.

  check_client    The server's side of the check worker (see `check_worker.py`): one child process, one
                  request at a time.
  check_worker    The check worker process: Mosaic lowering and libtpu compile, away from the server.
  chip_owner      One owner of this machine's TPU: which jobs need the chip, where they stand in its line, and
                  why a tuning that could have measured on it used the model instead.
  compile_pool    Runs the compiler's first stage in warm worker processes, once per distinct unit, and short
                  calls in a thread.
  compile_worker  The compile worker process: the first analysis stage (front end, codegen, VMEM) away from
                  the server.
  foreground      Work the user is waiting for goes first: background work waits while a tuning the user
                  started runs.
  machine_tpu     The TPU of the machine the server runs on, read from what the OS says: no jax, no libtpu, so
                  finding it costs no start-up time and never claims the chip (only one process may hold it:
                  the tuner must get it).
  prespawn        The first compile worker, started before the server imports anything else.
  standby         A warm tuning process (`python -m compiler.tune.standby`) that forks each tuning, so Tune
                  starts at once.
  tuning          Background tuning: one `python -m compiler.cli tune` subprocess per (document, kernel, shape
                  set).
  warmup          A tiny built-in kernel compiled once at start-up, so the first real compile does not pay the
                  imports.
  worker_loop     The child's side of a worker process (worker_process.py is the server's): warm up, say
                  "ready", then answer length-prefixed pickles one at a time.
  worker_process  One child process that answers requests, one at a time, and can always be stopped.

May import from helion_ls: `helion_ls.rewrite`; and `compiler`.
Never imports the modules at helion_ls's top level (server, handshake, early, __main__) nor helion_ls.features.
"""
