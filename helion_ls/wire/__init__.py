"""The wire: what travels between the editor and the server, below any feature. Bytes to messages and back
(framing, the transport that answers every request and ends the process cleanly), LSP positions and
diagnostics as plain JSON and as lsprotocol types, which client document shows each analysed line (a file
or a notebook's cells), the pacing of refresh requests, and how late the event loop answers (helion/stats).

  framing         LSP message framing that resynchronises after bad input (see transport.py for why).
  layout          Where the lines of an analysed module are shown: one file, or the code cells of a notebook.
  lsp             Conversions between compiler types and LSP (lsprotocol) types; the JSON forms and the column
                  conventions are in lsp_json.py.
  lsp_json        Compiler positions and diagnostics as LSP JSON, with the standard library only.
  monitor         Event-loop health: how late a periodic tick wakes up is how long the loop was blocked.
  pacing          Pacing of workspace/codeLens/refresh: never a second refresh before the client acted on the
                  first.
  process_end     The server process's end: from inside its event loop, never after `asyncio.run`'s teardown.
  transport       The server's end of the wire: message framing that resynchronises, and an answer to every
                  request.

May import nothing from helion_ls (the standard library, third-party packages and `compiler` only).
Never imports the modules at helion_ls's top level (server, handshake, early, __main__) nor helion_ls.features.
"""
