"""The method table (`core/methods.py`) against the ACP SDK 2.4.0 schemas: every `x-method` of
the four schema files is known with its sender, kind and versions, and the table knows nothing
the schemas do not. `.ci/run` unpacks the schemas into `.schemas/` (ACP_SCHEMA_DIR to use
another copy); without them the schema tests skip and say why."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from acp_bridge.core import methods as m
from acp_bridge.core import protocol as p
from tests.conftest import ROOT

SCHEMA_DIR = Path(os.environ.get("ACP_SCHEMA_DIR", ROOT / ".schemas" / "package" / "schema"))
FILES = [(version, stable) for version in (1, 2) for stable in (True, False)]
# The schemas name the side that handles a method; the table, the side that sends it.
SENDER_OF_SIDE = {"agent": m.CLIENT, "client": m.AGENT, "protocol": m.EITHER, "proxy": m.CHAIN}
KIND_OF_SUFFIX = {"Request": m.REQUEST, "Notification": m.NOTIFICATION}


def schema_methods(version: int, stable: bool) -> dict[tuple[str, str], str]:
    """(method, kind) -> x-side of each request and notification definition of one file."""
    path = SCHEMA_DIR / f"v{version}" / ("schema.json" if stable else "schema.unstable.json")
    if not path.is_file():
        pytest.skip(f"ACP schema {path} not found (.ci/run fetches it with npm pack)")
    defs: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))["$defs"]
    found: dict[tuple[str, str], str] = {}
    for name, definition in defs.items():
        kind = next((k for suffix, k in KIND_OF_SUFFIX.items() if name.endswith(suffix)), None)
        if isinstance(definition, dict) and "x-method" in definition and kind is not None:
            found[(definition["x-method"], kind)] = definition["x-side"]
    return found


@pytest.mark.parametrize(("version", "stable"), FILES)
def test_every_method_of_the_schemas_is_known_with_its_sender_and_kind(version: int, stable: bool) -> None:
    in_schema = schema_methods(version, stable)
    assert len(in_schema) > 10
    for (name, kind), side in in_schema.items():
        known = m.lookup(name, kind)
        assert known is not None, f"v{version} {name} ({kind}) is not in core/methods.py"
        assert known.sender == SENDER_OF_SIDE[side], name
        assert version in (known.stable if stable else known.versions), name


@pytest.mark.parametrize(("version", "stable"), FILES)
def test_the_table_knows_nothing_the_schemas_do_not(version: int, stable: bool) -> None:
    in_schema = schema_methods(version, stable)
    claimed = {(k.name, k.kind) for k in m.METHODS if version in (k.stable if stable else k.versions)}
    assert claimed == set(in_schema)


@pytest.mark.parametrize(("name", "kind", "sender", "versions", "unstable"), [
    ("session/archive", m.REQUEST, m.CLIENT, {1, 2}, True),
    ("session/unarchive", m.REQUEST, m.CLIENT, {1, 2}, True),
    ("session/status", m.REQUEST, m.CLIENT, {1, 2}, True),
    ("session/set_title", m.REQUEST, m.CLIENT, {1, 2}, True),
    ("auth/status", m.REQUEST, m.CLIENT, {1, 2}, True),
    ("auth/status_update", m.NOTIFICATION, m.AGENT, {1, 2}, True),
    ("providers/list", m.REQUEST, m.CLIENT, {1, 2}, True),
    ("mcp/message", m.REQUEST, m.AGENT, {1, 2}, True),
    ("mcp/message", m.NOTIFICATION, m.CLIENT, {1, 2}, True),
    ("tool_call/cancel", m.REQUEST, m.CLIENT, {2}, False),
    ("terminal/cancel", m.REQUEST, m.CLIENT, {2}, False),
    ("proxy/initialize", m.REQUEST, m.CHAIN, {1, 2}, True),
    ("proxy/successor", m.NOTIFICATION, m.CHAIN, {1, 2}, True),
    ("$/cancel_request", m.NOTIFICATION, m.EITHER, {1, 2}, False),
    ("session/load", m.REQUEST, m.CLIENT, {1}, False),
])
def test_new_and_old_methods(name: str, kind: str, sender: str, versions: set[int], unstable: bool) -> None:
    known = m.lookup(name, kind)
    assert known is not None
    assert (known.sender, set(known.versions), known.is_unstable) == (sender, versions, unstable)


@pytest.mark.parametrize("name", ["session/archive", "x/unknown", "", None, 7, ["session/new"]])
def test_no_method_of_a_kind_acp_lacks(name: Any) -> None:
    assert m.lookup(name, m.NOTIFICATION) is None  # none of these is a notification


def test_the_groups_are_methods_of_the_table() -> None:
    assert {"authenticate", "logout", "session/load", "session/set_mode", "fs/read_text_file",
                         "fs/write_text_file", "terminal/create", "terminal/output", "terminal/release",
                         "terminal/wait_for_exit", "terminal/kill"} == m.V1_ONLY
    for group in (m.SESSION_OPENERS, m.SESSION_REOPENERS, m.SESSION_CLOSERS, m.SESSION_DETACHED,
                  m.WAIT_BY_DESIGN, m.SETUP_METHODS):
        assert group <= m.NAMES
    assert {m.lookup(name, m.REQUEST).sender for name in m.WAIT_BY_DESIGN} == {m.AGENT}  # type: ignore[union-attr]
    assert p.SETUP_METHODS is m.SETUP_METHODS  # the protocol vocabulary reads the one table
