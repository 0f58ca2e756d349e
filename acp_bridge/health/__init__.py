"""Protocol health (docs/health.md): findings about stuck or broken exchanges.

`findings` holds the codes, `engine` and `sessions` the pure rules (fed live and offline),
`watchdog` the live observer, `offline` the findings and migration report from a capture and
`schema` the optional JSON schema validation; the command is `commands/check.py`. Importing
this package imports none of them, so `run` pays only for what it uses.
"""
