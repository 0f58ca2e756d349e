"""Replay: a capture served back as a stand-in agent, and the rules re-run over a capture.

- `script`: a capture read into an exchange script (what the agent side says, and when).
- `server`, `live_client`: the script served on stdio to a live client, whose lines are read at
  all times (trio).
- `rerun`: the recorded incoming lines fed through today's rules, offline, and compared.
- `diff`: a compact JSON diff of two messages.
- `turns`, `compare`: two captures aligned by session, turn and message, and compared (`acp-bridge diff`).
- `client_side`, `driver`, `facts`, `drive_report`: a capture's client side played to a live agent, and
  what it did compared with the recording (`acp-bridge drive`).
- `wire`: ids as the live client wrote them, and the errors for lines the recording cannot answer.
- `report`: the replay's stderr, bounded.

The command is `commands/replay.py`. Nothing here is imported by `run`: the group loads the
command only when `replay` is asked for.
"""
