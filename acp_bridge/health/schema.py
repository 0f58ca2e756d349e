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
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from acp_bridge.core.methods import INITIALIZE
from acp_bridge.core.protocol import Json
from acp_bridge.extras import install
from acp_bridge.health.findings import CODES, Finding

SUFFIX = {"request": "Request", "notification": "Notification", "response": "Response"}


class SchemaError(Exception):
    """The schemas cannot be used (not found, not JSON, not a schema, a $ref to nowhere,
    jsonschema missing): one line naming the file."""


def schema_root(directory: str) -> Path:
    """The folder holding `v1/` (and `v2/`) schema files, or SchemaError."""
    base = Path(directory)
    for candidate in (base, base / "schema", base / "package" / "schema"):
        if any((candidate / f"v{v}" / "schema.json").is_file() for v in (1, 2)):
            return candidate
    raise SchemaError(f"{directory}: no ACP schema found (expected v1/schema.json or v2/schema.json, "
                      "as in the npm package @agentclientprotocol/sdk: `npm pack @agentclientprotocol/sdk`, "
                      "unpack the .tgz and give the folder it makes)")


class Validator:
    """Validators for one schema folder, made per protocol version on first use."""

    def __init__(self, directory: str) -> None:
        import importlib

        try:
            jsonschema = importlib.import_module("jsonschema")  # the optional extra: only here
        except ImportError:
            raise SchemaError("--schema needs the jsonschema package: " + install("schema")) from None
        self._jsonschema = jsonschema
        self.root = schema_root(directory)
        self._loaded: dict[int, tuple[Any, dict[tuple[str, str], Any], Any]] = {}
        self._sources: dict[int, tuple[Path, Json]] = {}  # the file and its schema, per version

    def _for(self, version: int) -> tuple[Any, dict[tuple[str, str], Any], Any] | None:
        if version in self._loaded:
            return self._loaded[version]
        folder = self.root / f"v{version}"
        path = folder / "schema.unstable.json"
        if not path.is_file():
            path = folder / "schema.json"
        if not path.is_file():
            return None
        full = self._load(path)
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
        self._sources[version] = (path, full)
        return self._loaded[version]

    def _load(self, path: Path) -> Json:
        """The schema in `path`, checked to be one (SchemaError naming the file if not)."""
        try:
            full = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:  # unreadable, not UTF-8, not JSON
            raise SchemaError(f"{path}: cannot read the schema: {exc}") from None
        except RecursionError:
            raise SchemaError(f"{path}: cannot read the schema: nested too deep") from None
        if not isinstance(full, dict):
            raise SchemaError(f"{path}: not a JSON schema: it holds a JSON {_json_type(full)}, not an object")
        if not isinstance(full.get("$defs", {}), dict):
            raise SchemaError(f"{path}: not a JSON schema: its $defs is a JSON {_json_type(full['$defs'])}, "
                              "not an object")
        return full

    def _invalid(self, version: int) -> str | None:
        """What makes a schema that failed in use invalid, if the meta-schema tells (checked
        only then: it takes seconds for the ACP schema)."""
        try:
            self._jsonschema.Draft202012Validator.check_schema(self._sources[version][1])
        except self._jsonschema.exceptions.SchemaError as exc:
            where = "/".join(str(step) for step in exc.absolute_path)
            return f"not a valid JSON schema{' at /' + where if where else ''}: {_one_line(exc.message)}"
        except RecursionError:
            return "not a valid JSON schema: nested too deep"
        return None

    def check(self, msg: Any, kind: str, method: str | None, version: int) -> str | None:
        """Why `msg` does not validate, or None."""
        loaded = self._for(version)
        if loaded is None:
            return None
        try:
            return self._problem(loaded, msg, kind, method)
        except RecursionError:
            why = self._invalid(version) or "the schema cannot be used: a $ref loop, or nesting too deep"
        except Exception as exc:  # a $ref to nowhere, a bad keyword or pattern: what the schema makes raise
            why = self._invalid(version) or f"the schema cannot be used: {_one_line(str(exc)) or type(exc).__name__}"
        raise SchemaError(f"{self._sources[version][0]}: {why}")

    def _problem(self, loaded: tuple[Any, dict[tuple[str, str], Any], Any], msg: Any, kind: str,
                 method: str | None) -> str | None:
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


def _one_line(text: str) -> str:
    return " ".join(text.split())[:200]


def _json_type(value: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def schema_findings(validator: Validator, records: Iterable[Json]) -> list[Finding]:
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
        if method == INITIALIZE and record.get("kind") == "request" and isinstance(msg, dict):
            asked = msg.get("params", {}).get("protocolVersion") if isinstance(msg.get("params"), dict) else None
            if isinstance(asked, int) and not isinstance(asked, bool):
                version = asked
        if method == INITIALIZE and record.get("kind") == "response":
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
