"""`check --schema DIR`: every message validated against the official ACP JSON schema.

Owns: finding the schema files in DIR (the npm package `@agentclientprotocol/sdk`, its
`schema` folder, or a folder with `v1/` and `v2/`), choosing the definition each message is
checked against (the whole message against the schema's top level, then `params` or
`result` against the definition whose `x-method` is the message's method, and `error`
against `Error`), and turning failures into findings (`schema-invalid`). `jsonschema` is an
optional extra, imported only here. Must never: be imported by `run`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from acp_bridge.core.protocol import Json
from acp_bridge.health.findings import CODES, Finding

SUFFIX = {"request": "Request", "notification": "Notification", "response": "Response"}


class SchemaError(Exception):
    """The schemas cannot be used (not found, not JSON, jsonschema missing): one line."""


def schema_root(directory: str) -> Path:
    """The folder holding `v1/` (and `v2/`) schema files, or SchemaError."""
    base = Path(directory)
    for candidate in (base, base / "schema", base / "package" / "schema"):
        if any((candidate / f"v{v}" / "schema.json").is_file() for v in (1, 2)):
            return candidate
    raise SchemaError(f"{directory}: no ACP schema found (expected v1/schema.json or v2/schema.json, "
                      "as in the npm package @agentclientprotocol/sdk)")


class Validator:
    """Validators for one schema folder, made per protocol version on first use."""

    def __init__(self, directory: str) -> None:
        import importlib

        try:
            jsonschema = importlib.import_module("jsonschema")  # the optional extra: only here
        except ImportError:
            raise SchemaError("--schema needs the jsonschema package: "
                              "pip install 'acp-bridge-proxy[schema]'") from None
        self._jsonschema = jsonschema
        self.root = schema_root(directory)
        self._loaded: dict[int, tuple[Any, dict[tuple[str, str], Any], Any]] = {}

    def _for(self, version: int) -> tuple[Any, dict[tuple[str, str], Any], Any] | None:
        if version in self._loaded:
            return self._loaded[version]
        folder = self.root / f"v{version}"
        path = folder / "schema.unstable.json"
        if not path.is_file():
            path = folder / "schema.json"
        if not path.is_file():
            return None
        try:
            full = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SchemaError(f"{path}: cannot read the schema: {exc}") from None
        defs = full.get("$defs", {})
        make = self._jsonschema.Draft202012Validator
        by_method: dict[tuple[str, str], Any] = {}
        for name, definition in defs.items():
            method = definition.get("x-method") if isinstance(definition, dict) else None
            for suffix in SUFFIX.values():
                if isinstance(method, str) and name.endswith(suffix):
                    by_method[(method, suffix)] = make({"$ref": f"#/$defs/{name}", "$defs": defs})
        error = make({"$ref": "#/$defs/Error", "$defs": defs}) if "Error" in defs else None
        self._loaded[version] = (make(full), by_method, error)
        return self._loaded[version]

    def check(self, msg: Any, kind: str, method: str | None, version: int) -> str | None:
        """Why `msg` does not validate, or None."""
        loaded = self._for(version)
        if loaded is None:
            return None
        top, by_method, error_validator = loaded
        best = self._jsonschema.exceptions.best_match
        problem = best(top.iter_errors(msg))
        if problem is None and isinstance(msg, dict) and method is not None:
            if kind == "response" and "error" in msg and error_validator is not None:
                problem, part = best(error_validator.iter_errors(msg["error"])), "error"
            else:
                part = "result" if kind == "response" else "params"
                validator = by_method.get((method, SUFFIX.get(kind, "")))
                if validator is not None and part in msg:
                    problem = best(validator.iter_errors(msg[part]))
            if problem is not None:
                where = "/".join(str(step) for step in problem.absolute_path)
                return f"{method} {part}{'/' + where if where else ''}: {problem.message[:200]}"
        if problem is not None:
            where = "/".join(str(step) for step in problem.absolute_path)
            return f"{method or kind}{' at /' + where if where else ''}: {problem.message[:200]}"
        return None


def schema_findings(validator: Validator, records: list[Json]) -> list[Finding]:
    """One `schema-invalid` finding per message record that does not validate (what each
    side sent, and what the bridge sent instead when it changed or wrote a message)."""
    from acp_bridge.capture.reader import record_message

    findings = []
    version = 1
    for record in records:
        if record.get("type") != "message" or record.get("kind") not in SUFFIX:
            continue
        msg = record_message(record, "raw") if record.get("verdict") != "emit" else None
        method = record.get("method")
        if method == "initialize" and record.get("kind") == "request" and isinstance(msg, dict):
            asked = msg.get("params", {}).get("protocolVersion") if isinstance(msg.get("params"), dict) else None
            if isinstance(asked, int) and not isinstance(asked, bool):
                version = asked
        if method == "initialize" and record.get("kind") == "response":
            negotiated = msg.get("result", {}).get("protocolVersion") if isinstance(msg, dict) else None
            if isinstance(negotiated, int) and not isinstance(negotiated, bool):
                version = negotiated
        sent = [msg] if msg is not None else []
        if isinstance(record.get("out"), str):
            sent.append(record_message(record, "out"))
        for message in sent:
            if message is None:
                continue
            problem = validator.check(message, str(record["kind"]), method if isinstance(method, str) else None,
                                      version)
            if problem is not None:
                findings.append(Finding("schema-invalid", CODES["schema-invalid"].level, record.get("session"),
                                        f"v{version} schema: {problem}", float(record.get("mono", 0.0)),
                                        record.get("seq"), record.get("direction"), method, record.get("id")))
    return findings
