"""Changes to the user's source: the decorator edit Apply writes (pure text + ast), and the VMEM quick fixes,
each written into a copy of the source exactly as the fix writes it and compiled again before it is
offered (run inside a compile worker).

  edits           Rewrite a kernel's decorator to carry a config, touching nothing else.
  vmem_fixes      Quick fixes for out-of-VMEM errors (HPL300), verified before they are offered.

May import nothing from helion_ls (the standard library, third-party packages and `compiler` only).
Never imports the modules at helion_ls's top level (server, handshake, early, __main__) nor helion_ls.features.
"""
