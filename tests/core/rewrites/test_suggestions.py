"""The prompt-suggestions rule (bridge-rules.md 2), table-driven from tests/examples and
property-based on the pure shapes.

Each table case starts a Relay with only this rule, feeds one client `initialize` request and
the agent's response, then a script of (direction, input, expected) steps. Every case runs
twice: each line fed whole, and one byte at a time.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Sequence
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.config import Config, SuggestionsConfig
from acp_bridge.core.messages import Direction
from acp_bridge.core.relay import Forward, Relay, Verdict
from acp_bridge.core.rewrites import build_rewrites
from acp_bridge.core.rewrites import suggestion_shapes as shapes
from acp_bridge.core.rewrites.suggestions import (
    MAX_SESSIONS,
    PromptSuggestions,
    SuggestionsState,
    agent_accepts,
    stated_list_key,
)
from tests.conftest import example, line

TO_AGENT, TO_CLIENT = Direction.TO_AGENT, Direction.TO_CLIENT
SID = "sess_abc123"
SAME = "same"  # expected: forwarded as the very bytes that came in, nothing else sent

# -- messages ---------------------------------------------------------------------------------


def update(upd: dict[str, Any], sid: Any = SID) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": upd}}


def new_upd(*suggestions: Any, **extra: Any) -> dict[str, Any]:
    return update({"sessionUpdate": "prompt_suggestions_update", "suggestions": list(suggestions), **extra})


def legacy_upd(*items: Any, **extra: Any) -> dict[str, Any]:
    return update({"sessionUpdate": "session_info_update",
                   "_meta": {"promptSuggestions": {"suggestions": list(items)}}, **extra})


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def sugg(*blocks: Any, **extra: Any) -> dict[str, Any]:
    return {"prompt": list(blocks), **extra}


def t(s: str) -> dict[str, Any]:
    """A one-text-block suggestion."""
    return sugg(text(s))


def item(s: Any) -> dict[str, Any]:
    return {"text": s}


RUN = "Run the test suite and fix what breaks"
LINK = {"type": "resource_link", "uri": "file:///home/user/project/parser.py", "name": "parser.py"}
IMAGE = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
AUDIO = {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}
RESOURCE = {"type": "resource", "resource": {"uri": "file:///a.py", "text": "x = 1"}}

PROMPT = example("v1-session-prompt-request")  # id 5, SID
PROMPT_OK = example("v1-session-prompt-response")
PROMPT2_OK = example("v2-session-prompt-response")
LOAD = example("v1-session-load-request-with-system-prompt")  # id 2
LOAD_OK = example("v1-session-load-response")
RESUME_REPLAY = example("v2-session-resume-request-replay-with-system-prompt")  # id 2
RESUME_OK = example("v2-session-resume-response")
RESUME_NO_REPLAY = copy.deepcopy(RESUME_REPLAY)
del RESUME_NO_REPLAY["params"]["replayFrom"]

NEW_CLEAR = new_upd()
LEGACY_CLEAR = legacy_upd()

# client/agent initialize pairs, by short name
CLIENTS = {
    "v1-new": "v1-initialize-request-client-with-suggestions",
    "v1-new-img": "v1-initialize-request-client-with-suggestions-images",
    "v1-air": "v1-initialize-request-client-legacy-air",
    "v1-plain": "v1-initialize-request-client-plain",
    "v2-new-img": "v2-initialize-request-client-with-suggestions",
    "v2-air": "v2-initialize-request-client-legacy-air",
    "v2-plain": "v2-initialize-request-client-plain",
}
AGENTS = {
    "v1": "v1-initialize-response-agent-with-system-prompt",  # image, embeddedContext
    "v1-bare": "v1-initialize-response-agent-no-system-prompt",  # nothing
    "v2": "v2-initialize-response-agent-with-system-prompt",  # image, embeddedContext
    "v2-bare": "v2-initialize-response-agent-no-system-prompt",
}

# -- harness ----------------------------------------------------------------------------------


def feed(relay: Relay, direction: Direction, data: bytes, bytewise: bool) -> list[Forward]:
    if not bytewise:
        return relay.feed(direction, data)
    out: list[Forward] = []
    for i in range(len(data)):
        got = relay.feed(direction, data[i:i + 1])
        if i < len(data) - 1:
            assert got == [], "a partial line must stay buffered"
        out.extend(got)
    return out


def make_relay(client: str, agent: str | None, *, unlock: bool = False, bytewise: bool = False) -> Relay:
    relay = Relay([PromptSuggestions(SuggestionsConfig(unlock_legacy_agent=unlock))], strict=True)
    feed(relay, TO_AGENT, line(example(CLIENTS[client])), bytewise)
    if agent is not None:
        feed(relay, TO_CLIENT, line(example(AGENTS[agent])), bytewise)
    return relay


Step = tuple[Direction, Any, Any]


def wire(msg: dict[str, Any]) -> bytes:
    """A line as a client or agent other than orjson writes it (spaces after `:` and `,`), so
    a pass-through that was re-encoded would show in the bytes."""
    return json.dumps(msg, ensure_ascii=False).encode() + b"\n"


def run_script(relay: Relay, steps: Sequence[Step], bytewise: bool) -> None:
    for n, (direction, msg, expected) in enumerate(steps):
        raw = msg if isinstance(msg, bytes) else wire(msg)
        forwards = [f for f in feed(relay, direction, raw, bytewise) if f.data]
        if expected == SAME:
            assert len(forwards) == 1, f"step {n}: {forwards}"
            fwd = forwards[0]
            assert (fwd.direction, fwd.data) == (direction, raw), f"step {n}"
            assert fwd.verdict in (Verdict.PASS, Verdict.OTHER), f"step {n}"
            assert fwd.data is fwd.raw, f"step {n}: not the very bytes that came in"
        else:
            got = [(f.direction, orjson.loads(f.data)) for f in forwards]
            assert got == expected, f"step {n}"


def cases(*rows: Any) -> list[Any]:
    return [pytest.param(*row[:-1], id=row[-1]) for row in rows]


def drop() -> list[Any]:
    return []


# -- the table ------------------------------------------------------------------------------------

L1 = legacy_upd(item(RUN))
N1 = new_upd(t(RUN))
NEW_RUN = new_upd(t(RUN))

ROWS = cases(
    # 2.1: new client, new form
    ("v1-new", "v1", [(TO_CLIENT, example("v1-session-update-prompt-suggestions"), SAME)], "v1-new-client-new-update-passes"),
    ("v2-new-img", "v2", [(TO_CLIENT, example("v2-session-update-prompt-suggestions"), SAME)], "v2-new-client-new-update-passes"),
    # 2.2 legacy -> new, for a new client
    ("v1-new", "v1", [(TO_CLIENT, example("v1-session-update-legacy-prompt-suggestions"),
                       [(TO_CLIENT, NEW_RUN)])], "v1-new-client-legacy-converted"),
    ("v2-new-img", "v2", [(TO_CLIENT, example("v2-session-update-legacy-prompt-suggestions"),
                           [(TO_CLIENT, NEW_RUN)])], "v2-new-client-legacy-converted"),
    ("v1-new", "v1", [(TO_CLIENT, legacy_upd(item("a"), item("b")), [(TO_CLIENT, new_upd(t("a"), t("b")))])],
     "legacy-order-kept"),
    ("v1-new", "v1", [(TO_CLIENT, legacy_upd(item(RUN), title="Fix parser", updatedAt="2026-11-05T12:00:00Z"),
                       [(TO_CLIENT, update({"sessionUpdate": "session_info_update", "title": "Fix parser",
                                            "updatedAt": "2026-11-05T12:00:00Z"})),
                        (TO_CLIENT, NEW_RUN)])], "legacy-with-title-keeps-title-then-new"),
    ("v2-new-img", "v2", [(TO_CLIENT, update({"sessionUpdate": "session_info_update", "x": 1,
                                              "_meta": {"promptSuggestions": {"suggestions": [item(RUN)]},
                                                        "acme": {"k": 1}}}),
                           [(TO_CLIENT, update({"sessionUpdate": "session_info_update", "x": 1,
                                                "_meta": {"acme": {"k": 1}}})),
                            (TO_CLIENT, NEW_RUN)])], "legacy-other-meta-and-unknown-fields-survive"),
    ("v1-new", "v1", [(TO_CLIENT, {**L1, "params": {**L1["params"], "_meta": {"traceparent": "00-x"}}},
                       [(TO_CLIENT, {**NEW_RUN, "params": {**NEW_RUN["params"], "_meta": {"traceparent": "00-x"}}})])],
     "legacy-envelope-meta-carried-to-new-notification"),
    ("v1-new", "v1", [(TO_CLIENT, update({"sessionUpdate": "session_info_update", "_meta": {"promptSuggestions": {
        "suggestions": [{"text": "a", "_meta": {"rank": 1}}], "_meta": {"src": "cc"}}}}),
        [(TO_CLIENT, new_upd(sugg(text("a"), _meta={"rank": 1}), _meta={"src": "cc"}))])],
     "legacy-meta-kept-where-new-form-has-a-place"),
    ("v1-new", "v1", [(TO_CLIENT, example("v1-session-update-legacy-prompt-suggestions-clear"), drop())],
     "v1-new-client-legacy-clear-of-empty-list-dropped"),
    ("v2-new-img", "v2", [(TO_CLIENT, legacy_upd(item("   "), item(5), "str", item(None), item("ok")),
                           [(TO_CLIENT, new_upd(t("ok")))])], "legacy-blank-and-non-string-items-dropped"),
    ("v2-new-img", "v2", [(TO_CLIENT, update({"sessionUpdate": "session_info_update",
                                              "_meta": {"promptSuggestions": "junk"}}), drop())],
     "new-client-malformed-legacy-stripped"),
    # 2.1 both forms for one prediction: exactly one reaches the client
    ("v1-new", "v1", [(TO_CLIENT, L1, [(TO_CLIENT, NEW_RUN)]), (TO_CLIENT, N1, drop())],
     "new-client-legacy-then-new-seen-once"),
    ("v2-new-img", "v2", [(TO_CLIENT, new_upd(t(RUN), sugg(text("Explain"), LINK)), SAME),
                          (TO_CLIENT, L1, drop())], "new-client-new-then-legacy-seen-once"),
    ("v1-new", "v1", [(TO_CLIENT, N1, SAME), (TO_CLIENT, L1, drop()), (TO_CLIENT, legacy_upd(item("b")), drop()),
                      (TO_CLIENT, new_upd(t("b")), SAME)], "new-client-agent-speaking-new-legacy-ignored"),
    # 2.1 AIR client
    ("v1-air", "v1", [(TO_CLIENT, example("v1-session-update-legacy-prompt-suggestions"), SAME)],
     "v1-air-client-legacy-passes"),
    ("v2-air", "v2", [(TO_CLIENT, example("v2-session-update-legacy-prompt-suggestions"), SAME)],
     "v2-air-client-legacy-passes"),
    ("v1-air", "v1", [(TO_CLIENT, example("v1-session-update-prompt-suggestions"), [(TO_CLIENT, L1)])],
     "v1-air-client-new-converted-to-legacy"),
    ("v2-air", "v2", [(TO_CLIENT, example("v2-session-update-prompt-suggestions"), [(TO_CLIENT, L1)])],
     "v2-air-client-new-converted-link-suggestion-skipped"),
    ("v2-air", "v2", [(TO_CLIENT, new_upd(sugg(text("Add tests for "), text("parser.py"), _meta={"r": 1}),
                                          _meta={"m": 2}, extra=3),
                       [(TO_CLIENT, update({"sessionUpdate": "session_info_update", "_meta": {"promptSuggestions": {
                           "suggestions": [{"text": "Add tests for parser.py", "_meta": {"r": 1}}],
                           "_meta": {"m": 2}}}}))])], "air-client-texts-concatenated-meta-kept"),
    ("v1-air", "v1", [(TO_CLIENT, N1, [(TO_CLIENT, L1)]),
                      (TO_CLIENT, example("v1-session-update-prompt-suggestions-clear"), [(TO_CLIENT, LEGACY_CLEAR)])],
     "air-client-new-clear-converted"),
    ("v1-air", "v1", [(TO_CLIENT, new_upd(sugg(LINK)), drop())], "air-client-nothing-convertible-to-empty-dropped"),
    ("v1-air", "v1", [(TO_CLIENT, L1, SAME), (TO_CLIENT, N1, drop())], "air-client-legacy-then-new-seen-once"),
    ("v2-air", "v2", [(TO_CLIENT, N1, [(TO_CLIENT, L1)]), (TO_CLIENT, L1, drop())],
     "air-client-new-then-legacy-seen-once"),
    ("v1-air", "v1", [(TO_CLIENT, L1, SAME), (TO_CLIENT, new_upd(t("other")), drop()),
                      (TO_CLIENT, legacy_upd(item("other")), SAME)], "air-client-agent-speaking-legacy-new-ignored"),
    ("v1-air", "v1", [(TO_CLIENT, legacy_upd(item(" "), item(RUN)), [(TO_CLIENT, L1)])],
     "air-client-blank-legacy-items-dropped"),
    ("v1-air", "v1", [(TO_CLIENT, update({"sessionUpdate": "session_info_update",
                                          "_meta": {"promptSuggestions": "junk"}}), SAME)],
     "air-client-unknown-legacy-shape-untouched"),
    # 2.1 neither
    ("v1-plain", "v1", [(TO_CLIENT, example("v1-session-update-prompt-suggestions"), drop())],
     "v1-plain-client-new-dropped"),
    ("v2-plain", "v2", [(TO_CLIENT, example("v2-session-update-prompt-suggestions-clear"), drop())],
     "v2-plain-client-new-clear-dropped"),
    ("v1-plain", "v1", [(TO_CLIENT, example("v1-session-update-legacy-prompt-suggestions"), drop())],
     "v1-plain-client-legacy-dropped"),
    ("v2-plain", "v2", [(TO_CLIENT, legacy_upd(item(RUN), title="T"),
                         [(TO_CLIENT, update({"sessionUpdate": "session_info_update", "title": "T"}))])],
     "v2-plain-client-legacy-stripped-title-kept"),
    ("v2-plain", "v2", [(TO_CLIENT, update({"sessionUpdate": "session_info_update",
                                            "_meta": {"promptSuggestions": None, "k": 1}}),
                         [(TO_CLIENT, update({"sessionUpdate": "session_info_update", "_meta": {"k": 1}}))])],
     "plain-client-null-legacy-key-stripped"),
    ("v1-plain", "v1", [(TO_CLIENT, example("v1-session-update-session-info-title"), SAME)],
     "plain-client-title-update-untouched"),
    # 2.3 filtering
    ("v2-new-img", "v2", [(TO_CLIENT, new_upd(sugg(text("see"), IMAGE)), SAME)], "image-allowed-by-both-kept"),
    ("v1-new-img", "v1", [(TO_CLIENT, new_upd(sugg(text("see"), IMAGE)), SAME)], "v1-image-allowed-by-both-kept"),
    ("v2-new-img", "v2-bare", [(TO_CLIENT, new_upd(t("a"), sugg(IMAGE)), [(TO_CLIENT, new_upd(t("a")))])],
     "image-agent-does-not-accept-skipped"),
    ("v1-new", "v1", [(TO_CLIENT, new_upd(t("a"), sugg(IMAGE)), [(TO_CLIENT, new_upd(t("a")))])],
     "image-client-did-not-opt-in-skipped"),
    ("v1-new-img", "v1-bare", [(TO_CLIENT, new_upd(t("a"), sugg(IMAGE)), [(TO_CLIENT, new_upd(t("a")))])],
     "v1-image-agent-false-skipped"),
    ("v2-new-img", "v2", [(TO_CLIENT, new_upd(sugg(AUDIO), t("a")), [(TO_CLIENT, new_upd(t("a")))])],
     "audio-not-opted-in-skipped"),
    ("v2-new-img", "v2", [(TO_CLIENT, new_upd(sugg(text("x"), RESOURCE), t("a")), [(TO_CLIENT, new_upd(t("a")))])],
     "resource-without-embedded-context-opt-in-skipped"),
    ("v2-new-img", "v2", [(TO_CLIENT, new_upd(sugg(LINK), t("a")), SAME)], "resource-link-always-allowed"),
    ("v2-new-img", "v2", [(TO_CLIENT, new_upd(t("  \n\t"), sugg(text(""), text(" ")), t("a")),
                           [(TO_CLIENT, new_upd(t("a")))])], "whitespace-only-skipped"),
    ("v2-new-img", "v2", [(TO_CLIENT, new_upd(sugg(text(" "), LINK)), SAME)], "blank-text-with-link-kept"),
    ("v2-new-img", "v2", [(TO_CLIENT, new_upd({"prompt": []}, {"nope": 1}, {"prompt": "x"}, None, t("a")),
                           [(TO_CLIENT, new_upd(t("a")))])], "missing-empty-non-list-prompt-skipped"),
    ("v2-new-img", "v2", [(TO_CLIENT, new_upd(sugg({"type": "text"}), sugg({"type": "text", "text": 1}),
                                              sugg({"type": "image", "data": "x"}), sugg({"type": "resource_link"}),
                                              sugg({"type": "resource", "resource": {"uri": "u"}}),
                                              sugg("text"), sugg({"type": ["text"], "text": "x"}), t("a")),
                           [(TO_CLIENT, new_upd(t("a")))])], "malformed-blocks-skipped-whole"),
    ("v2-new-img", "v2", [(TO_CLIENT, new_upd(sugg({"type": "skill", "name": "x"}), sugg(text("a"), {"type": "_x"}),
                                              t("a")), [(TO_CLIENT, new_upd(t("a")))])], "unknown-block-type-skipped"),
    ("v2-new-img", "v2", [(TO_CLIENT, new_upd(t("a"), sugg(AUDIO), _meta={"k": 1}, future=[1]),
                           [(TO_CLIENT, new_upd(t("a"), _meta={"k": 1}, future=[1]))])],
     "other-fields-of-filtered-update-survive"),
    ("v2-new-img", "v2", [(TO_CLIENT, new_upd(t("a")), SAME), (TO_CLIENT, new_upd(sugg(AUDIO)),
                                                               [(TO_CLIENT, NEW_CLEAR)])],
     "fully-filtered-update-withdraws"),
    ("v2-new-img", "v2", [(TO_CLIENT, new_upd(sugg(AUDIO)), drop())], "fully-filtered-with-nothing-held-sends-nothing"),
    ("v2-new-img", "v2", [(TO_CLIENT, update({"sessionUpdate": "prompt_suggestions_update"}), drop()),
                          (TO_CLIENT, update({"sessionUpdate": "prompt_suggestions_update", "suggestions": None}),
                           drop())], "update-without-a-list-not-delivered"),
    ("v2-new-img", None, [(TO_CLIENT, new_upd(sugg(IMAGE), t("a")), [(TO_CLIENT, new_upd(t("a")))])],
     "agent-caps-unknown-treated-as-absent"),
    # 2.4 withdrawal on prompt
    ("v1-new", "v1", [(TO_CLIENT, N1, SAME), (TO_AGENT, PROMPT, [(TO_AGENT, PROMPT), (TO_CLIENT, NEW_CLEAR)]),
                      (TO_CLIENT, example("v1-session-update-prompt-suggestions-clear"), drop()),
                      (TO_CLIENT, PROMPT_OK, SAME)], "v1-new-client-withdrawn-on-prompt-agent-clear-dropped"),
    ("v2-new-img", "v2", [(TO_CLIENT, L1, [(TO_CLIENT, NEW_RUN)]),
                          (TO_AGENT, example("v2-session-prompt-request"),
                           [(TO_AGENT, example("v2-session-prompt-request")), (TO_CLIENT, NEW_CLEAR)])],
     "v2-legacy-agent-new-client-withdrawn-in-new-form"),
    ("v1-air", "v1", [(TO_CLIENT, N1, [(TO_CLIENT, L1)]), (TO_AGENT, PROMPT, [(TO_AGENT, PROMPT),
                                                                            (TO_CLIENT, LEGACY_CLEAR)]),
                      (TO_CLIENT, LEGACY_CLEAR, drop())], "v1-air-client-withdrawn-in-legacy-form"),
    ("v2-air", "v2", [(TO_CLIENT, L1, SAME), (TO_AGENT, PROMPT, [(TO_AGENT, PROMPT), (TO_CLIENT, LEGACY_CLEAR)]),
                      (TO_CLIENT, PROMPT2_OK, SAME), (TO_CLIENT, LEGACY_CLEAR, drop())],
     "v2-air-client-withdrawn-agent-clear-dropped"),
    ("v1-new", "v1", [(TO_AGENT, PROMPT, SAME)], "prompt-with-nothing-held-untouched"),
    ("v1-plain", "v1", [(TO_CLIENT, N1, drop()), (TO_AGENT, PROMPT, SAME)], "plain-client-prompt-untouched"),
    ("v1-new", "v1", [(TO_CLIENT, update({"sessionUpdate": "prompt_suggestions_update", "suggestions": [t("x")]},
                                         sid="other"), SAME),
                      (TO_AGENT, PROMPT, SAME)], "withdrawal-is-per-session"),
    ("v1-new", "v1", [(TO_CLIENT, N1, SAME), (TO_CLIENT, N1, drop()), (TO_CLIENT, new_upd(t("b")), SAME),
                      (TO_CLIENT, NEW_CLEAR, SAME), (TO_CLIENT, NEW_CLEAR, drop())], "never-the-same-list-twice"),
    ("v1-air", "v1", [(TO_CLIENT, L1, SAME), (TO_CLIENT, L1, drop()),
                      (TO_CLIENT, legacy_upd(item(RUN), title="T"),
                       [(TO_CLIENT, update({"sessionUpdate": "session_info_update", "title": "T"}))])],
     "air-client-repeat-stripped-title-kept"),
    # 2.4 stale legacy predictions while a prompt is in flight
    ("v1-new", "v1", [(TO_AGENT, PROMPT, SAME), (TO_CLIENT, L1, drop()), (TO_CLIENT, PROMPT_OK, SAME),
                      (TO_CLIENT, L1, [(TO_CLIENT, NEW_RUN)])], "v1-legacy-during-prompt-dropped-after-delivered"),
    ("v1-air", "v1", [(TO_AGENT, PROMPT, SAME), (TO_CLIENT, legacy_upd(item(RUN), title="T"),
                                                 [(TO_CLIENT, update({"sessionUpdate": "session_info_update",
                                                                      "title": "T"}))])],
     "air-client-legacy-during-prompt-stripped"),
    ("v2-air", "v2", [(TO_AGENT, PROMPT, SAME), (TO_CLIENT, N1, [(TO_CLIENT, L1)]),
                      (TO_CLIENT, LEGACY_CLEAR, SAME)], "legacy-clear-during-prompt-honoured"),
    ("v2-new-img", "v2", [(TO_AGENT, PROMPT, SAME), (TO_CLIENT, N1, SAME)], "new-form-during-prompt-delivered"),
    # 2.4 replay
    ("v1-new", "v1", [(TO_AGENT, LOAD, SAME), (TO_CLIENT, N1, drop()), (TO_CLIENT, L1, drop()),
                      (TO_CLIENT, legacy_upd(item(RUN), title="T"),
                       [(TO_CLIENT, update({"sessionUpdate": "session_info_update", "title": "T"}))]),
                      (TO_CLIENT, LOAD_OK, SAME), (TO_AGENT, PROMPT, SAME), (TO_CLIENT, N1, SAME)],
     "v1-load-replay-suggestions-not-forwarded-list-empty-after"),
    ("v1-air", "v1", [(TO_CLIENT, L1, SAME), (TO_AGENT, LOAD, SAME), (TO_CLIENT, L1, drop()),
                      (TO_CLIENT, LOAD_OK, SAME), (TO_AGENT, PROMPT, SAME)], "v1-air-load-replay-resets-list"),
    ("v2-new-img", "v2", [(TO_AGENT, RESUME_REPLAY, SAME), (TO_CLIENT, N1, drop()), (TO_CLIENT, L1, drop()),
                          (TO_CLIENT, RESUME_OK, SAME), (TO_CLIENT, N1, SAME)], "v2-resume-replay-not-forwarded"),
    ("v2-new-img", "v2", [(TO_AGENT, RESUME_NO_REPLAY, SAME), (TO_CLIENT, N1, SAME)], "v2-resume-without-replay-delivers"),
    ("v1-new", "v1", [(TO_AGENT, LOAD, SAME), (TO_CLIENT, update(N1["params"]["update"], sid="other"), SAME)],
     "replay-is-per-session"),
    # 2.5 initialize
    ("v1-new", "v1", [(TO_CLIENT, example("v1-session-update-agent-message-chunk"), SAME)], "unrelated-update-untouched"),
    ("v2-new-img", "v2", [(TO_CLIENT, example("v2-session-update-unknown-extension-variant"), SAME),
                          (TO_CLIENT, example("v2-session-update-state-idle"), SAME),
                          (TO_CLIENT, example("v2-session-update-available-commands"), SAME),
                          (TO_CLIENT, example("v2-session-update-user-message"), SAME)], "v2-unrelated-untouched"),
    ("v1-new", "v1", [(TO_AGENT, {"jsonrpc": "2.0", "method": "session/update", "params": L1["params"]}, SAME)],
     "suggestion-shapes-toward-agent-untouched"),
    ("v1-new", "v1", [(TO_CLIENT, b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s",'
                                  b'"update":{"sessionUpdate":"session_info_update","_meta":{"promptSuggestions"'
                                  b':{"suggestions":[]}}}}, "extra"]\n', SAME),
                      (TO_CLIENT, b'{"promptSuggestions": broken\n', SAME)], "non-messages-with-triggers-untouched"),
)


@pytest.mark.parametrize("bytewise", [False, True], ids=["whole", "bytewise"])
@pytest.mark.parametrize(("client", "agent", "steps"), ROWS)
def test_rule_table(client: str, agent: str | None, steps: list[Step], bytewise: bool) -> None:
    run_script(make_relay(client, agent, bytewise=bytewise), steps, bytewise)


# -- initialize ---------------------------------------------------------------------------------

AIR = {"version": 1, "capabilities": []}


def with_path(msg: dict[str, Any], path: Sequence[str], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(msg)
    obj = out
    for key in path[:-1]:
        obj = obj.setdefault(key, {})
    obj[path[-1]] = value
    return out


INIT_ROWS = cases(
    ("v1-air", False, with_path(example(CLIENTS["v1-air"]), ["params", "clientCapabilities", "session",
                                                            "promptSuggestions"], {}), "v1-air-gets-capability"),
    ("v2-air", False, with_path(example(CLIENTS["v2-air"]), ["params", "capabilities", "session",
                                                            "promptSuggestions"], {}), "v2-air-gets-capability"),
    ("v1-air", True, with_path(example(CLIENTS["v1-air"]), ["params", "clientCapabilities", "session",
                                                           "promptSuggestions"], {}),
     "v1-air-with-unlock-only-capability"),
    ("v1-new", False, SAME, "v1-new-client-untouched"),
    ("v2-new-img", False, SAME, "v2-new-client-untouched"),
    ("v1-new", True, with_path(example(CLIENTS["v1-new"]), ["params", "clientCapabilities", "_meta", "jetbrains",
                                                           "air"], AIR), "v1-unlock-adds-air-marker"),
    ("v2-new-img", True, with_path(example(CLIENTS["v2-new-img"]), ["params", "capabilities", "_meta", "jetbrains",
                                                                   "air"], AIR), "v2-unlock-adds-air-marker"),
    ("v1-plain", True, SAME, "v1-plain-unlock-untouched"),
    ("v2-plain", False, SAME, "v2-plain-untouched"),
)


@pytest.mark.parametrize("bytewise", [False, True], ids=["whole", "bytewise"])
@pytest.mark.parametrize(("client", "unlock", "expected"), INIT_ROWS)
def test_initialize_request(client: str, unlock: bool, expected: Any, bytewise: bool) -> None:
    relay = Relay([PromptSuggestions(SuggestionsConfig(unlock_legacy_agent=unlock))], strict=True)
    init = example(CLIENTS[client])
    run_script(relay, [(TO_AGENT, init, SAME if expected == SAME else [(TO_AGENT, expected)])], bytewise)
    # the session keeps what the client sent, so the client's form does not change
    assert relay.session.client_init == init["params"]


def init_with_caps(caps: dict[str, Any], version: int = 1) -> dict[str, Any]:
    key = "capabilities" if version >= 2 else "clientCapabilities"
    return {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": version, key: caps}}


MARK = {"jetbrains": {"air": {"version": 1, "capabilities": ["diffPatch"]}}}

CAPS_ROWS = cases(
    ({"_meta": MARK, "session": None}, False, {"_meta": MARK, "session": {"promptSuggestions": {}}}, "session-null"),
    ({"_meta": MARK, "session": {"notices": {}, "promptSuggestions": None}}, False,
     {"_meta": MARK, "session": {"notices": {}, "promptSuggestions": {}}}, "keeps-other-session-caps"),
    ({"_meta": MARK, "session": "odd"}, False, SAME, "non-object-session-left-alone"),
    ({"session": {"promptSuggestions": {}}, "_meta": {"acme": 1, "jetbrains": {"gateway": 2}}}, True,
     {"session": {"promptSuggestions": {}}, "_meta": {"acme": 1, "jetbrains": {"gateway": 2, "air": AIR}}},
     "unlock-keeps-other-meta"),
    ({"session": {"promptSuggestions": {}}, "_meta": None}, True,
     {"session": {"promptSuggestions": {}}, "_meta": {"jetbrains": {"air": AIR}}}, "unlock-meta-null"),
    ({"session": {"promptSuggestions": {}}, "_meta": {"jetbrains": "x"}}, True, SAME, "unlock-odd-meta-left-alone"),
    ({"session": {"promptSuggestions": {}}, "_meta": MARK}, True, SAME, "unlock-new-client-with-marker-untouched"),
)


@pytest.mark.parametrize(("caps", "unlock", "expected"), CAPS_ROWS)
def test_initialize_capability_edits(caps: dict[str, Any], unlock: bool, expected: Any) -> None:
    relay = Relay([PromptSuggestions(SuggestionsConfig(unlock_legacy_agent=unlock))], strict=True)
    out = SAME if expected == SAME else [(TO_AGENT, init_with_caps(expected))]
    run_script(relay, [(TO_AGENT, init_with_caps(caps), out)], bytewise=False)


def test_nothing_rewritten_before_client_initialize() -> None:
    """bridge-rules 1: until the client's initialize has passed, lines pass unchanged."""
    relay = Relay([PromptSuggestions(SuggestionsConfig())], strict=True)
    run_script(relay, [(TO_CLIENT, L1, SAME), (TO_CLIENT, N1, SAME), (TO_AGENT, PROMPT, SAME)], bytewise=False)


def test_prompt_forwarded_byte_exact_when_withdrawal_emitted() -> None:
    """A withdrawal must not cost the prompt its original bytes (bridge-rules 0): the rule
    returns `Replace(the same msg, then=(withdrawal,))`, which the relay forwards as it came."""
    relay = make_relay("v1-new", "v1")
    relay.feed(TO_CLIENT, line(N1))
    raw = json.dumps(PROMPT, indent=None).encode() + b"\n"  # spaces after ':' and ','
    out = relay.feed(TO_AGENT, raw)
    assert [(f.direction, f.data) for f in out] == [(TO_AGENT, raw), (TO_CLIENT, line(NEW_CLEAR))]


def test_disabled_rule_not_in_chain() -> None:
    """`enabled = false`: the rule is not built, so nothing at all is changed (2.5)."""
    config = Config(suggestions=SuggestionsConfig(enabled=False))
    assert not any(isinstance(rw, PromptSuggestions) for rw in build_rewrites(config))
    assert any(isinstance(rw, PromptSuggestions) for rw in build_rewrites(Config()))


def test_state_records_offered_list() -> None:
    relay = make_relay("v1-air", "v1")
    relay.feed(TO_CLIENT, line(N1))
    state = relay.session.state_for(SuggestionsState, SID)
    assert (state.offered, state.offered_form, state.agent_forms) == ([item(RUN)], "legacy", {"new"})


# -- pure shapes: properties ---------------------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
json_values = st.recursive(json_scalars, lambda kids: st.lists(kids, max_size=3)
                           | st.dictionaries(st.text(max_size=5), kids, max_size=3), max_leaves=8)
metas = st.none() | st.dictionaries(st.text(max_size=5), json_values, max_size=2)
legacy_items = st.builds(lambda text, meta: {"text": text} if meta is None else {"text": text, "_meta": meta},
                         st.text(max_size=20), metas)


@given(st.lists(legacy_items, max_size=6))
def test_legacy_new_legacy_keeps_text_suggestions(items: list[dict[str, Any]]) -> None:
    """legacy -> new -> legacy gives back every non-blank item, in order, `_meta` included."""
    assert shapes.to_legacy_shape(shapes.to_new_shape(items)) == [i for i in items if i["text"].strip()]


@given(st.lists(legacy_items, max_size=6))
def test_new_shape_is_always_deliverable(items: list[dict[str, Any]]) -> None:
    converted = shapes.to_new_shape(items)
    assert shapes.filter_suggestions(converted, shapes.TEXT_ONLY) == converted


@given(st.lists(st.lists(st.text(max_size=8), min_size=1, max_size=3), max_size=5))
def test_new_legacy_new_joins_text_blocks(prompts: list[list[str]]) -> None:
    suggestions = [sugg(*(text(s) for s in blocks)) for blocks in prompts]
    round_trip = shapes.to_new_shape(shapes.to_legacy_shape(suggestions))
    assert round_trip == [t("".join(b)) for b in prompts if "".join(b).strip()]


block_types = st.sampled_from(["text", "image", "audio", "resource", "resource_link", "skill", "_x", 3, None])
blocks = st.one_of(
    st.builds(lambda kind, fields: {"type": kind, **fields}, block_types,
              st.fixed_dictionaries({}, optional={
                  "text": st.text(alphabet=" \tab", max_size=3) | st.integers(),
                  "data": st.just("AAAA"), "mimeType": st.just("image/png"),
                  "uri": st.just("file:///x"), "name": st.just("x"),
                  "resource": st.fixed_dictionaries({"uri": st.just("u")}, optional={"text": st.just("t"),
                                                                                      "blob": st.just("b")}),
              })),
    json_values,
)
suggestion_values = st.one_of(st.fixed_dictionaries({}, optional={"prompt": st.lists(blocks, max_size=3) | json_values,
                                                                  "_meta": metas}), json_values)
opt_in: st.SearchStrategy[Any] = st.sampled_from([None, {}, False, True])
caps_strategy = st.fixed_dictionaries({"image": opt_in, "audio": opt_in, "embeddedContext": opt_in})
agent_caps = st.sets(st.sampled_from(["image", "audio", "embeddedContext"]))


def assert_deliverable(kept: list[Any], allowed: frozenset[str]) -> None:
    for suggestion in kept:
        prompt = suggestion["prompt"]
        assert isinstance(prompt, list) and prompt, "never an empty prompt"
        assert all(shapes.well_formed_block(b) and b["type"] in allowed for b in prompt)
        if all(b["type"] == "text" for b in prompt):
            assert "".join(b["text"] for b in prompt).strip()


@given(st.lists(suggestion_values, max_size=5), caps_strategy, agent_caps)
def test_filter_never_delivers_empty_or_forbidden(suggestions: list[Any], client: dict[str, Any],
                                                  agent: set[str]) -> None:
    allowed = shapes.allowed_block_types(client, agent.__contains__)
    for block, cap in {"image": "image", "audio": "audio", "resource": "embeddedContext"}.items():
        assert (block in allowed) == (client[cap] not in (None, False) and cap in agent)
    kept = shapes.filter_suggestions(suggestions, allowed)
    assert_deliverable(kept, allowed)
    assert all(any(k is s for s in suggestions) for k in kept), "kept whole, never trimmed"


@given(st.lists(suggestion_values, max_size=5), caps_strategy, st.sampled_from(["v1", "v2", "v1-bare", "v2-bare"]))
def test_chain_never_delivers_forbidden_blocks(suggestions: list[Any], client_opt_ins: dict[str, Any],
                                               agent: str) -> None:
    """Through the relay: what reaches a new client is always deliverable under both sides' caps."""
    version = 2 if agent.startswith("v2") else 1
    relay = Relay([PromptSuggestions(SuggestionsConfig())], strict=True)
    relay.feed(TO_AGENT, line(init_with_caps({"session": {"promptSuggestions": client_opt_ins}}, version)))
    relay.feed(TO_CLIENT, line(example(AGENTS[agent])))
    allowed = shapes.allowed_block_types(client_opt_ins, lambda c: agent_accepts(relay.session, c))
    for fwd in relay.feed(TO_CLIENT, wire(new_upd(*suggestions))):
        if not fwd.data:
            continue
        msg = orjson.loads(fwd.data)
        assert_deliverable(msg["params"]["update"]["suggestions"], allowed)


neutral_updates = st.one_of(
    st.builds(lambda txt: {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": txt}},
              st.text(max_size=30) | st.sampled_from(["promptSuggestions", "prompt_suggestions_update", "é\u2028"])),
    st.builds(lambda name, body: {"sessionUpdate": "_" + name, "payload": body}, st.text(max_size=10), json_values),
    st.builds(lambda body: {"sessionUpdate": "tool_call_update", "toolCallId": "t1",
                            "rawOutput": {"promptSuggestions": body}}, json_values),
    st.builds(lambda title: {"sessionUpdate": "session_info_update", "title": title,
                             "_meta": {"note": "promptSuggestions"}}, st.text(max_size=10)),
)


@given(neutral_updates, st.sampled_from(sorted(CLIENTS)), st.booleans(), st.booleans())
def test_unrelated_messages_pass_byte_exact(upd: dict[str, Any], client: str, pretty: bool, ascii_: bool) -> None:
    """Through the full default chain, a message no rule concerns leaves as the bytes it came in as."""
    relay = Relay(build_rewrites(Config(suggestions=SuggestionsConfig(unlock_legacy_agent=True))), strict=True)
    relay.feed(TO_AGENT, line(example(CLIENTS[client])))
    relay.feed(TO_CLIENT, line(example(AGENTS["v2" if client.startswith("v2") else "v1"])))
    msg = update(upd)
    raw = (json.dumps(msg, ensure_ascii=ascii_,
                      separators=(", ", ": ") if pretty else (",", ":")) + "\n").encode()
    out = relay.feed(TO_CLIENT, raw)
    assert [(f.direction, f.data) for f in out] == [(TO_CLIENT, raw)]
    assert out[0].data is out[0].raw and out[0].verdict is Verdict.PASS


# -- unlock_legacy_agent that unlocks nothing says why, once -----------------------------------

UNLOCK_LOG = "acp_bridge.suggestions"


def unlock_messages(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == UNLOCK_LOG]


@pytest.mark.parametrize(("client", "why"), [
    pytest.param("v1-plain", 'client "my-client" does not advertise session.promptSuggestions, so it would not '
                 "show the suggestions a legacy agent sends (the AIR marker is added only for clients that do)",
                 id="plain-client"),
    pytest.param("v2-plain", 'client "my-client" does not advertise session.promptSuggestions, so it would not '
                 "show the suggestions a legacy agent sends (the AIR marker is added only for clients that do)",
                 id="v2-plain-client"),
    pytest.param("v1-air", 'client "air" already carries the JetBrains AIR marker (_meta.jetbrains.air), '
                 "so legacy agents already send it suggestions", id="air-client"),
])
def test_unlock_that_unlocks_nothing_says_why_once(caplog: pytest.LogCaptureFixture, client: str, why: str) -> None:
    caplog.set_level(logging.INFO, UNLOCK_LOG)
    relay = Relay([PromptSuggestions(SuggestionsConfig(unlock_legacy_agent=True))], strict=True)
    init = example(CLIENTS[client])
    relay.feed(TO_AGENT, line(init))
    relay.feed(TO_AGENT, line({**init, "id": 1}))  # a second initialize: said once
    assert unlock_messages(caplog) == [(logging.INFO, f"--unlock-legacy-agent: nothing unlocked: {why}")]


def test_unlock_with_no_place_for_the_marker_says_why(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, UNLOCK_LOG)
    relay = Relay([PromptSuggestions(SuggestionsConfig(unlock_legacy_agent=True))], strict=True)
    relay.feed(TO_AGENT, line(init_with_caps({"session": {"promptSuggestions": {}}, "_meta": {"jetbrains": "x"}})))
    assert unlock_messages(caplog) == [(logging.INFO, "--unlock-legacy-agent: nothing unlocked: the AIR marker "
                                        "has no place in the client's capabilities (_meta.jetbrains.air holds a "
                                        "value, or something on the way is not an object)")]


@pytest.mark.parametrize(("client", "unlock"), [("v1-new", True), ("v1-plain", False), ("v1-air", False)])
def test_unlock_that_unlocks_or_was_not_asked_for_says_nothing(caplog: pytest.LogCaptureFixture, client: str,
                                                              unlock: bool) -> None:
    caplog.set_level(logging.DEBUG, UNLOCK_LOG)
    make_relay(client, "v1", unlock=unlock)
    assert unlock_messages(caplog) == []


# -- a lone surrogate escape (JavaScript's JSON.stringify writes one for half an emoji) ----------

HALF = "\ud83d"


def js_line(msg: dict[str, Any]) -> bytes:
    """A line as JavaScript writes it: a lone surrogate as an escape (orjson refuses it)."""
    return json.dumps(msg).encode() + b"\n"


@pytest.mark.parametrize("text", ["fix this " + HALF, "[{" * 300 + HALF], ids=["text", "many-brackets"])
def test_a_prompt_with_a_lone_surrogate_withdraws_the_offer(text: str) -> None:
    relay = make_relay("v1-new", "v1")
    relay.feed(TO_CLIENT, line(N1))
    prompt = copy.deepcopy(PROMPT)
    prompt["params"]["prompt"][0]["text"] = text
    raw = js_line(prompt)
    out = relay.feed(TO_AGENT, raw)
    assert [(f.direction, f.data) for f in out] == [(TO_AGENT, raw), (TO_CLIENT, line(NEW_CLEAR))]
    assert out[0].data is raw and out[0].verdict is Verdict.PASS


def test_a_legacy_prediction_made_during_a_lone_surrogate_prompt_is_stale() -> None:
    relay = make_relay("v1-air", "v1-bare")
    run_script(relay, [(TO_CLIENT, L1, SAME)], bytewise=False)
    prompt = copy.deepcopy(PROMPT)
    prompt["params"]["prompt"][0]["text"] = HALF
    raw = js_line(prompt)
    out = relay.feed(TO_AGENT, raw)
    assert [(f.direction, f.data) for f in out] == [(TO_AGENT, raw), (TO_CLIENT, line(LEGACY_CLEAR))]
    run_script(relay, [
        (TO_CLIENT, legacy_upd(item("Now the docs")), drop()),  # predicted for the old turn
        (TO_CLIENT, line(PROMPT_OK), SAME),  # the prompt is answered: predictions count again
        (TO_CLIENT, legacy_upd(item("Now the docs")), SAME),
    ], bytewise=False)


@pytest.mark.parametrize("bytewise", [False, True])
def test_a_session_id_with_a_lone_surrogate_gets_its_withdrawal_written_as_it_came(bytewise: bool) -> None:
    relay = make_relay("v1-new", "v1", bytewise=bytewise)
    offer = js_line(new_upd(t(RUN)) | {"params": {"sessionId": HALF, "update": N1["params"]["update"]}})
    run_script(relay, [(TO_CLIENT, offer, SAME)], bytewise)
    prompt = js_line({"jsonrpc": "2.0", "id": 6, "method": "session/prompt",
                      "params": {"sessionId": HALF, "prompt": [{"type": "text", "text": "go"}]}})
    out = feed(relay, TO_AGENT, prompt, bytewise)
    assert [(f.direction, f.data) for f in out] == [(TO_AGENT, prompt), (TO_CLIENT, (
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"\\ud83d",'
        b'"update":{"sessionUpdate":"prompt_suggestions_update","suggestions":[]}}}\n'))]


def test_suggestions_during_a_replay_asked_for_with_a_lone_surrogate_are_dropped() -> None:
    """The load's params are read again from its line (`Pending.params`), lone surrogate
    and all: the replay is seen, and what the agent suggests meanwhile is not delivered."""
    relay = make_relay("v1-new", "v1")
    load = copy.deepcopy(LOAD)
    load["params"]["cwd"] = "/home/" + HALF
    run_script(relay, [
        (TO_AGENT, js_line(load), SAME),
        (TO_CLIENT, N1, drop()),
        (TO_CLIENT, LOAD_OK, SAME),
        (TO_CLIENT, N1, [(TO_CLIENT, N1)]),
    ], bytewise=False)


def in_session(msg: dict[str, Any], sid: Any) -> dict[str, Any]:
    return {**msg, "params": {**msg["params"], "sessionId": sid}}


def test_suggestion_state_is_bounded_across_sessions() -> None:
    """The agent names the sessions, and may name a million: the rule keeps state for at
    most MAX_SESSIONS of them. Past it, the session used longest ago is let go (a later
    prompt there withdraws nothing); one used since keeps its place, and a closed one frees
    its place."""
    relay = make_relay("v1-new", "v1")
    offers = b"".join(line(in_session(N1, f"s{i}")) for i in range(MAX_SESSIONS + 10))
    relay.feed(TO_CLIENT, offers)
    held = [i for i in range(MAX_SESSIONS + 10) if relay.session.existing_state(SuggestionsState, f"s{i}")]
    assert held == list(range(10, MAX_SESSIONS + 10))
    assert relay.session.session_count == MAX_SESSIONS

    def prompt(rid: int, sid: str) -> bytes:
        return line({**in_session(PROMPT, sid), "id": rid})

    assert [f.data for f in relay.feed(TO_AGENT, prompt(1, "s0"))] == [prompt(1, "s0")]  # let go: nothing to withdraw
    relay.feed(TO_CLIENT, line(in_session(N1, "s10")))  # s10 used again: now the newest
    relay.feed(TO_CLIENT, line(in_session(N1, "new")))
    assert relay.session.existing_state(SuggestionsState, "s10") is not None
    assert relay.session.existing_state(SuggestionsState, "s11") is None  # the oldest then
    assert [f.data for f in relay.feed(TO_AGENT, prompt(2, "s10"))] == [prompt(2, "s10"), line(in_session(NEW_CLEAR, "s10"))]
    relay.feed(TO_AGENT, line({"jsonrpc": "2.0", "id": 9, "method": "session/close", "params": {"sessionId": "s12"}}))
    relay.feed(TO_CLIENT, b'{"jsonrpc":"2.0","id":9,"result":{}}\n')  # Connection forgets s12's state
    relay.feed(TO_CLIENT, line(in_session(N1, "newer")))
    assert relay.session.existing_state(SuggestionsState, "s13") is not None  # s12's place was free
    assert relay.session.session_count == MAX_SESSIONS


@pytest.mark.parametrize(("direction", "verdict", "msg", "key"), [
    (TO_CLIENT, Verdict.EMIT, in_session(NEW_CLEAR, "s1"), ("suggestions", (str, "s1"))),
    (TO_CLIENT, Verdict.EMIT, in_session(N1, "s1"), ("suggestions", (str, "s1"))),
    (TO_CLIENT, Verdict.EMIT, in_session(LEGACY_CLEAR, "s1"), ("suggestions", (str, "s1"))),
    (TO_CLIENT, Verdict.EMIT, in_session(N1, 1), ("suggestions", (int, 1))),  # 1 is not "1"
    (TO_CLIENT, Verdict.EMIT, update({"sessionUpdate": "session_info_update", "title": "T",
                                      "_meta": {"promptSuggestions": {"suggestions": []}}}), None),  # says more
    (TO_CLIENT, Verdict.EMIT, update({"sessionUpdate": "agent_message_chunk"}), None),
    (TO_CLIENT, Verdict.EMIT, {"jsonrpc": "2.0", "id": 3, "error": {"code": -32603, "message": "gone"}}, None),
    (TO_CLIENT, Verdict.PASS, in_session(N1, "s1"), None),  # the agent's own line is never replaced
    (TO_AGENT, Verdict.EMIT, in_session(N1, "s1"), None),
])
def test_which_messages_of_the_bridge_state_a_whole_suggestion_list(
        direction: Direction, verdict: Verdict, msg: dict[str, Any], key: Any) -> None:
    """A later one with the same key replaces an earlier one still queued toward a client
    that reads nothing (shell/streams.py `Outlet.put_keyed`): only what states the list whole."""
    fwd = Forward(direction, line(msg), b"", verdict, None, ("suggestions",))
    assert stated_list_key(fwd) == key


@pytest.mark.parametrize(("first", "second"), [
    (True, 1), (1, True), (False, 0), (0, False), (1, 1.0), (1.0, 1), ([True], [1]), ({"k": 1}, {"k": True}),
    (0, -0.0), (None, False),
], ids=repr)
@pytest.mark.parametrize("client", ["v1-new", "v1-air"])
def test_a_list_that_differs_only_in_json_type_is_sent_again(client: str, first: Any, second: Any) -> None:
    """No repeats (bridge-rules 2.4) means the very list the client holds: `true` is not `1`
    and `1` is not `1.0` (the bridge keeps each number as it was written, and keys `1` and
    `1.0` apart as ids), so a list differing only so is the agent's new list, not a repeat.
    Python's `==` said they were the same and dropped the second."""
    relay = make_relay(client, "v1")

    def listing(value: Any) -> dict[str, Any]:
        if client == "v1-new":
            return new_upd(sugg(text(RUN), _meta={"n": value}))
        return legacy_upd({"text": RUN, "_meta": {"n": value}})

    for value in (first, second):
        run_script(relay, [(TO_CLIENT, listing(value), SAME)], bytewise=False)
    again = listing(second)
    run_script(relay, [(TO_CLIENT, again, drop())], bytewise=False)  # the very list again: a repeat
