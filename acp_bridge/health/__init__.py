"""Protocol health (docs/health.md): findings about stuck or broken exchanges.

`findings` holds the codes, `engine` the pure rules (fed live and post hoc), `watchdog` the
live observer, `posthoc` the findings and migration report from a capture, `check` the CLI
command and `schema` the optional JSON schema validation. Importing this package imports
none of them, so `run` pays only for what it uses.
"""
