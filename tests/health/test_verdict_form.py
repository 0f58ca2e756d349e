"""`check`'s migration verdict reads the client's form as the suggestions rule reads it.

The rule decides which form a client gets (`client_form`, bridge-rules 2.1); the verdict says
why the pair still needs the bridge from the form it finds in the capture. Both call
`core/shapes.client_form` on the capabilities the session kept, so they cannot drift: here,
for any `initialize` pair (odd types included), the rule's form, after a real relay took the
pair, is the verdict's.
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import example, given
from hypothesis import strategies as st

from acp_bridge.capture.reader import load_record
from acp_bridge.capture.records import CaptureEncoder, dumps
from acp_bridge.config import Config
from acp_bridge.core.messages import Direction
from acp_bridge.core.relay import Relay
from acp_bridge.core.rewrites import build_rewrites
from acp_bridge.core.rewrites.suggestions import client_form
from acp_bridge.core.shapes import LEGACY, NEW
from acp_bridge.health.offline import analyse

A, C = Direction.TO_AGENT, Direction.TO_CLIENT
ABSENT = object()  # a key left out

odd: st.SearchStrategy[Any] = st.sampled_from([None, False, True, 0, 1, "x", [], [{}], {}])
marker_values = st.one_of(st.just(ABSENT), odd, st.just({"version": 1, "capabilities": []}))
suggestions_values = st.one_of(st.just(ABSENT), odd, st.just({"image": {}}))


def _put(obj: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    return obj if value is ABSENT else {**obj, key: value}


@st.composite
def capabilities(draw: st.DrawFn) -> Any:
    """A client's (or an agent's) capability object: with or without `session.promptSuggestions`,
    the AIR marker, other capabilities; or some other value where it belongs."""
    if draw(st.booleans()) and draw(st.booleans()):
        return draw(odd)
    session = _put({}, "promptSuggestions", draw(suggestions_values))
    if draw(st.booleans()):
        session["prompt"] = {"image": {}}
    caps: dict[str, Any] = _put({}, "session", draw(st.one_of(st.just(session), st.just(ABSENT), odd)))
    jetbrains = _put({}, "air", draw(marker_values))
    caps = _put(caps, "_meta", draw(st.one_of(st.just({"jetbrains": jetbrains}),
                                               st.just({"jetbrains": draw(odd)}), st.just(ABSENT), odd)))
    if draw(st.booleans()):
        caps.update({"fs": {"readTextFile": True}, "terminal": True, "promptCapabilities": {"image": True}})
    return caps


@st.composite
def initialize_params(draw: st.DrawFn, v1_key: str, v2_key: str) -> Any:
    """`initialize` params (or a result): v1 or v2 keys, both, neither, or no object at all."""
    if draw(st.integers(0, 9)) == 0:
        return draw(odd)
    params: dict[str, Any] = _put({}, "protocolVersion", draw(st.sampled_from([ABSENT, 1, 2, "2", None])))
    for key in draw(st.sampled_from([(v1_key,), (v2_key,), (v1_key, v2_key), (v2_key, v1_key), ()])):
        params[key] = draw(capabilities())
    return params


def _line(msg: dict[str, Any]) -> bytes:
    return orjson.dumps(msg) + b"\n"


LEGACY_UPDATE = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": {
    "sessionUpdate": "session_info_update", "_meta": {"promptSuggestions": {"suggestions": [{"text": "Go"}]}}}}}


@example(client={"clientCapabilities": {"session": {"promptSuggestions": {}},
                                        "_meta": {"jetbrains": {"air": {}}}}}, agent={"protocolVersion": 1})
@example(client={"clientCapabilities": None, "capabilities": {"_meta": {"jetbrains": {"air": {}}}}}, agent={})
@example(client={"capabilities": {"session": {"promptSuggestions": False}}}, agent={"protocolVersion": 2})
@example(client=[], agent=None)
@given(client=initialize_params("clientCapabilities", "capabilities"),
       agent=initialize_params("agentCapabilities", "capabilities"))
def test_the_verdict_reads_the_client_form_the_rule_reads(client: Any, agent: Any) -> None:
    relay = Relay(build_rewrites(Config()), strict=True)
    encoder = CaptureEncoder()
    lines = [dumps({"type": "header", "format": 1, "mono": 0.0})]
    traffic = [(A, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": client}),
               (C, {"jsonrpc": "2.0", "id": 0, "result": agent}), (C, LEGACY_UPDATE)]
    for n, (direction, msg) in enumerate(traffic):
        lines += encoder.encode_batch(0.0, float(n), relay.feed(direction, _line(msg), float(n))).splitlines()
    rule = client_form(relay.session)
    migration = analyse("c", [r for r in map(load_record, lines) if r is not None]).migration
    assert migration.reads == rule
    assert migration.client_form in {NEW: ("new", "both"), LEGACY: ("legacy (AIR only)",), None: ("none",)}[rule]
    converted = "converted for a client that reads the new form" in migration.verdict()
    assert converted == (rule == NEW)  # the legacy suggestion was converted exactly for a new client


def test_a_capture_without_initialize_names_no_form() -> None:
    report = analyse("c", [{"type": "message", "seq": 1, "direction": "to-client", "kind": "notification",
                            "method": "session/update", "verdict": "pass", "raw": _line(LEGACY_UPDATE).decode()}])
    assert (report.migration.reads, report.migration.client_form) == (None, "unknown")
    assert report.migration.verdict() == "nothing was rewritten: the bridge can be removed"
