"""Replay: a capture served back as a stand-in agent, and the rules re-run over a capture.

- `script`: a capture read into an exchange script (what the agent side says, and when).
- `server`: the script served on stdio to a live client (trio).
- `rerun`: the recorded incoming lines fed through today's rules, offline, and compared.
- `diff`: a compact JSON diff of two messages.
- `cli`: the `acp-bridge replay` command.

Nothing here is imported by `run`: the group loads `cli` only when `replay` is asked for.
"""
