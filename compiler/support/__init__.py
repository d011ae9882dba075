"""Small shared support every stage uses; none of it knows about kernels.

diagnostics.py   one diagnostics model for every stage (LSP positions, stable HPL codes)
syntax.py        `parse`: ast.parse behind one process-wide lock
lifeline.py      child processes that end with the process that started them
forking.py       whether a fork of this process makes a sound worker
sqlite_file.py   one SQLite file shared by processes, recovering from damage (tuning store, analysis cache)

Imports only the standard library: everything else in `compiler` may import it.
"""
