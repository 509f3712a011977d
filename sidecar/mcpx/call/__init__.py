"""The call: one call of one upstream tool, from its request to its end, whatever kind of upstream serves it.

- `request.py`: what was called, by whom, from where (`CallRequest`), and a request for the calling client itself
  (`Slot`).
- `record.py`: the call as one owned object (`Call`): its state changes only through its own methods, each of
  which tells the call's observers (`Call.watch`: the surface's driver, the task door, the REST routes).
- `run.py`: what a running call offers the kind of upstream that runs it (`CallRun`, upstream/kind.py's
  `CallScope`): mcpx's own questions, confirmations, progress, secrets, what a restart continues from.
- `lifecycle.py`: the daemon's calls (`Calls`): started, run to their end and recorded, cancelled, and taken up
  again after a restart.
- `failures.py`: how a call ends without a result (`CallError`), and an id no call has (`UnknownTask`).
"""
