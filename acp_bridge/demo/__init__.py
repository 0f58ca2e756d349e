"""`acp-bridge demo`: a bundled legacy agent and a scripted client, both rewrites shown."""
