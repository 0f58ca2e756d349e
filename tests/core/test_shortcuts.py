"""The per-line shortcuts of the second performance round (issue 17), each proven equal to
the obvious code it replaces, and shown to be the path taken.

- `id_key`'s fast path for int and str ids;
- `Connection.on_request` reading the message once rather than through Frame's properties;
- the suggestions rule's `replays` (a request's params are parsed again only for the
  methods that can replay) and its cached `client_form`.
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.config import Config
from acp_bridge.core import protocol as p
from acp_bridge.core.messages import Direction, Frame, Kind, classify, id_key
from acp_bridge.core.relay import Relay
from acp_bridge.core.rewrites import build_rewrites
from acp_bridge.core.rewrites.suggestions import PromptSuggestions, client_form, is_replay, replays
from acp_bridge.core.session import _UNREAD, Connection, Pending

TO_AGENT, TO_CLIENT = Direction.TO_AGENT, Direction.TO_CLIENT

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False), st.text(max_size=8))
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)), max_leaves=8)
methods = st.one_of(st.sampled_from([p.SESSION_LOAD, p.SESSION_RESUME, p.SESSION_PROMPT, p.INITIALIZE,
                                     p.SESSION_NEW, "x/y", ""]), st.text(max_size=12))


def reference_id_key(id_: Any) -> tuple[type, Any]:
    """id_key as it was before its fast path."""
    if isinstance(id_, (dict, list)):
        try:
            return (type(id_), orjson.dumps(id_, option=orjson.OPT_SORT_KEYS).decode())
        except TypeError:
            return (type(id_), None)
    return (type(id_), id_)


@given(json_values)
def test_id_key_equals_its_reference(id_: Any) -> None:
    assert id_key(id_) == reference_id_key(id_)


class _Int(int):
    pass


def test_id_key_fast_path_is_exact_types_only() -> None:
    # A subclass is not an int for the fast path; it takes the general one, same answer.
    assert id_key(_Int(3)) == (_Int, 3) == reference_id_key(_Int(3))
    assert id_key(True) == (bool, True) != id_key(1)


request_fields = st.fixed_dictionaries({}, optional={
    "id": json_values, "method": st.one_of(methods, json_values), "params": json_values})


@given(request_fields, st.sampled_from(list(Direction)), st.floats(0, 1e6))
def test_on_request_reads_what_the_frame_properties_read(msg: dict[str, Any], direction: Direction,
                                                         at: float) -> None:
    raw = orjson.dumps(msg) + b"\n"
    frame = Frame(direction, raw, Kind.REQUEST, msg)
    pending = Connection().on_request(frame, at)
    assert (pending.origin, pending.method, pending.session_id, pending.raw, pending.at) == (
        direction, frame.method or "", p.get_path(frame.params, "sessionId"), raw, at)
    assert pending.id is frame.id or pending.id == frame.id


def test_on_request_of_a_frame_without_a_message() -> None:
    pending = Connection().on_request(Frame(TO_AGENT, b"x\n", Kind.REQUEST), 1.0)
    assert (pending.id, pending.method, pending.session_id) == (None, "", None)


def _v2_session(v2: bool) -> Connection:
    session = Connection()
    session.client_init = {"protocolVersion": 2 if v2 else 1}
    return session


@given(methods, json_values, st.booleans())
def test_replays_equals_is_replay(method: str, params: Any, v2: bool) -> None:
    raw = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}) + b"\n"
    request = Pending(TO_AGENT, 1, method, None, raw)
    assert replays(request, _v2_session(v2)) == is_replay(method, request.params, v2)


def test_an_answered_prompt_is_not_parsed_again() -> None:
    """The shortcut is taken: answering a prompt leaves its line unparsed."""
    relay = Relay(build_rewrites(Config()))
    relay.feed(TO_AGENT, b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,'
                         b'"clientCapabilities":{"session":{"promptSuggestions":{}}}}}\n')
    relay.feed(TO_CLIENT, b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}\n')
    relay.feed(TO_AGENT, b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}\n')
    [request] = relay.session.pending(TO_AGENT)
    [answer] = relay.feed(TO_CLIENT, b'{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}\n')
    assert answer.request is request
    assert request._params is _UNREAD


inits = st.one_of(json_values, st.fixed_dictionaries({}, optional={
    "protocolVersion": st.sampled_from([1, 2]),
    "clientCapabilities": st.fixed_dictionaries({}, optional={
        "session": st.one_of(json_values, st.fixed_dictionaries({"promptSuggestions": json_values})),
        "_meta": st.one_of(json_values, st.just({"jetbrains": {"air": {}}}))})}))


@given(st.lists(inits, min_size=1, max_size=4))
def test_cached_client_form_follows_every_initialize(sequence: list[Any]) -> None:
    rule = PromptSuggestions(Config().suggestions)
    session = Connection()
    for params in sequence:
        session.client_init = params if isinstance(params, dict) else {}
        assert rule._client_form(session) == client_form(session)
        assert rule._client_form(session) == client_form(session)  # now from the cache
        assert rule._form_of[0] is session.client_caps


def test_classify_kinds_are_the_enum_members() -> None:
    """The module globals `classify` uses are the members themselves."""
    lines = {b'{"id":1,"method":"m"}': Kind.REQUEST, b'{"method":"m"}': Kind.NOTIFICATION,
             b'{"id":1,"result":0}': Kind.RESPONSE, b"[1]": Kind.OTHER, b"{": Kind.OTHER}
    for raw, kind in lines.items():
        assert classify(TO_AGENT, raw).kind is kind
