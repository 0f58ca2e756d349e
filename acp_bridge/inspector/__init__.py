"""The live inspector of `acp-bridge ui`: a small read-only web server over the captures of
some folders (Starlette on Hypercorn's trio worker, the `ui` extra). Only `commands/ui.py`
imports it, and only when `acp-bridge ui` runs: the bridge itself never does.

Modules: `guard` (the door: token, Host, Origin, methods, headers), `app` (routes and the
state behind them), `timeline` (a capture's page rows as it grows), `server` (binding and
serving).
"""
