"""`acp-bridge setup` and `acp-bridge doctor`: the bridge wired into an editor's agent settings,
and an agent checked the way an editor would start it (docs/editors.md).

Importing the package imports none of its modules. `entries` and `report` are pure (entries
built, wrapped and unwrapped; what doctor says about an agent's answer), `settings_file` reads
and writes an editor's settings, `settings_document` edits their text through the `setup`
extra's JSONC library, and `probe` starts the bridge in front of an agent and speaks to it.
"""
