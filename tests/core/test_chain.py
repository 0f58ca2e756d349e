"""Chain.run, table-driven: the rules run in order, each sees the message as the rules before
it left it, a drop stops the chain, and what every rule emitted is kept in order."""

from __future__ import annotations

import logging

import orjson
import pytest

from acp_bridge.core import (
    DROP,
    PASS,
    Connection,
    Direction,
    Emit,
    Frame,
    Kind,
    Relay,
    Replace,
    Rule,
    Verdict,
    classify,
)
from acp_bridge.core.chain import ERROR_SHOWN, Chain, RuleError
from acp_bridge.core.rewrites.base import EVERY_LINE, Outcome
from acp_bridge.core.session import Pending

A, C = Direction.TO_AGENT, Direction.TO_CLIENT
REQUEST = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"trail": []}}


class Step(Rule):
    """A rule that notes the trail it saw, then does one thing: "pass", "mark" (add its name
    to the trail), "drop", "emit" (forward as it is and say something), "mark+emit",
    "drop+emit"."""

    def __init__(self, name: str, does: str) -> None:
        self.name, self.does = name, does
        self.saw: list[str] | None = None

    def request(self, frame: Frame, session: Connection) -> Outcome:
        assert isinstance(frame.msg, dict)
        self.saw = list(frame.msg["params"]["trail"])
        then = (Emit(C, {"jsonrpc": "2.0", "method": f"{self.name}/said"}),) if "emit" in self.does else ()
        if self.does.startswith("drop"):
            return Replace(None, then) if then else DROP
        if self.does.startswith("mark"):
            return Replace({**frame.msg, "params": {"trail": [*self.saw, self.name]}}, then)
        return Replace(frame.msg, then) if then else PASS


def summary(chain: Chain, frame: Frame) -> tuple[list[str], bool, list[str], list[str]] | None:
    outcome = chain.run(frame, None, Connection())
    if outcome is None:
        return None
    assert isinstance(outcome.frame.msg, dict)
    return (outcome.rules, outcome.dropped, outcome.frame.msg["params"]["trail"],
            [e.msg["method"] for e in outcome.emits if isinstance(e.msg, dict)])


@pytest.mark.parametrize(("steps", "saw", "outcome"), [
    # Every rule passes: nothing is allocated, the frame goes as it came.
    ([("a", "pass"), ("b", "pass")], [[], []], None),
    # A later rule sees what an earlier one made of the message.
    ([("a", "mark"), ("b", "pass"), ("c", "mark")], [[], ["a"], ["a"]], (["a", "c"], False, ["a", "c"], [])),
    # A drop stops the chain: the rules after it are not called.
    ([("a", "mark"), ("b", "drop"), ("c", "mark")], [[], ["a"], None], (["a", "b"], True, ["a"], [])),
    ([("a", "drop"), ("b", "emit")], [[], None], (["a"], True, [], [])),
    # What rules emit is kept in chain order, from a rule that drops too.
    ([("a", "emit"), ("b", "mark+emit"), ("c", "drop+emit"), ("d", "emit")], [[], [], ["b"], None],
     (["a", "b", "c"], True, ["b"], ["a/said", "b/said", "c/said"])),
    # A rule that only emits names itself, and leaves the message as it was.
    ([("a", "pass"), ("b", "emit")], [[], []], (["b"], False, [], ["b/said"])),
])
def test_rules_run_in_order_and_a_drop_stops_the_chain(
        steps: list[tuple[str, str]], saw: list[list[str] | None],
        outcome: tuple[list[str], bool, list[str], list[str]] | None) -> None:
    rules = [Step(name, does) for name, does in steps]
    frame = classify(A, orjson.dumps(REQUEST) + b"\n")
    assert summary(Chain(rules), frame) == outcome
    assert [rule.saw for rule in rules] == saw
    assert frame.msg == REQUEST  # the message as it arrived is left for the capture


def test_a_rule_that_only_emits_keeps_the_frame_itself() -> None:
    frame = classify(A, orjson.dumps(REQUEST) + b"\n")
    outcome = Chain([Step("a", "emit")]).run(frame, None, Connection())
    assert outcome is not None and outcome.frame is frame


class Hooks(Rule):
    """Notes which hook was called for what."""

    name = "hooks"
    triggers = EVERY_LINE

    def __init__(self) -> None:
        self.called: list[str] = []

    def request(self, frame: Frame, session: Connection) -> Outcome:
        self.called.append("request")
        return PASS

    def response(self, frame: Frame, request: Pending, session: Connection) -> Outcome:
        self.called.append(f"response to {request.method}")
        return PASS

    def notification(self, frame: Frame, session: Connection) -> Outcome:
        self.called.append("notification")
        return PASS


class OnlyResponses(Rule):
    name = "only-responses"

    def response(self, frame: Frame, request: Pending, session: Connection) -> Outcome:
        raise AssertionError("a request never reaches a response hook")


@pytest.mark.parametrize(("line", "called"), [
    (b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}', ["request"]),
    (b'{"jsonrpc":"2.0","method":"session/update","params":{}}', ["notification"]),
])
def test_each_kind_calls_its_own_hook(line: bytes, called: list[str]) -> None:
    hooks = Hooks()
    assert Chain([hooks]).run(classify(A, line + b"\n"), None, Connection()) is None
    assert hooks.called == called


def test_a_response_is_given_its_request() -> None:
    session = Connection()
    request = classify(C, b'{"jsonrpc":"2.0","id":7,"method":"fs/read_text_file","params":{}}\n')
    pending = session.on_request(request)
    hooks = Hooks()
    Chain([hooks]).run(classify(A, b'{"jsonrpc":"2.0","id":7,"result":{}}\n'), pending, session)
    assert hooks.called == ["response to fs/read_text_file"]


def test_only_the_hooks_a_rule_overrides_are_wanted() -> None:
    chain = Chain([OnlyResponses()])
    assert [kind for kind in (Kind.REQUEST, Kind.RESPONSE, Kind.NOTIFICATION) if chain.wants(kind)] == [Kind.RESPONSE]
    assert chain.run(classify(A, orjson.dumps(REQUEST) + b"\n"), None, Connection()) is None
    assert Chain([Hooks()]).triggers == frozenset(EVERY_LINE)


# -- a rule's failures: named, and only outcomes count ----------------------------------------


class Returns(Rule):
    def __init__(self, value: object) -> None:
        self.value = value

    def request(self, frame: Frame, session: Connection) -> Outcome:
        return self.value  # type: ignore[return-value]


@pytest.mark.parametrize(("value", "why"), [
    ("PASS", "returned 'PASS', not an outcome (PASS, DROP, Replace)"),
    ({"jsonrpc": "2.0"}, "returned {'jsonrpc': '2.0'}, not an outcome (PASS, DROP, Replace)"),
    (Replace([1]), "Replace(list): the message must be a dict (a JSON object)"),  # type: ignore[arg-type]
    (Replace({}, then=Emit(C, {})), "Replace(then=Emit): then= takes a tuple of Emit"),  # type: ignore[arg-type]
    (Replace({}, then=({"m": 1},)), "then= holds {'m': 1}, not an Emit(Direction, dict)"),  # type: ignore[arg-type]
    (Replace({}, then=(Emit("to-client", {}),)), "then= holds Emit(direction='to-client', msg={}), "  # type: ignore[arg-type]
                                                 "not an Emit(Direction, dict)"),
    # before= is checked as then= is: what it holds is written ahead of the message.
    (Replace({}, before=Emit(C, {})), "Replace(before=Emit): before= takes a tuple of Emit"),  # type: ignore[arg-type]
    (Replace({}, before=("garbage",)), "before= holds 'garbage', not an Emit(Direction, dict)"),  # type: ignore[arg-type]
    (Replace({}, before=(Emit("to-client", {}),)), "before= holds Emit(direction='to-client', msg={}), "  # type: ignore[arg-type]
                                                   "not an Emit(Direction, dict)"),
    (Replace({}, before=(Emit(C, [1]),)), "before= holds Emit(direction=<Direction.TO_CLIENT: 'to-client'>, "  # type: ignore[arg-type]
                                          "msg=[1]), not an Emit(Direction, dict)"),
])
def test_what_is_not_an_outcome_is_a_failure_of_that_rule(value: object, why: str) -> None:
    with pytest.raises(RuleError) as raised:
        Chain([Returns(value)]).run(classify(A, orjson.dumps(REQUEST) + b"\n"), None, Connection())
    assert (raised.value.rule, str(raised.value)) == ("Returns", f"rule 'Returns' failed: TypeError: {why}")


class Nothing(Rule):
    """Each hook notes its call and returns nothing, as a mitmproxy hook may."""

    triggers = EVERY_LINE

    def __init__(self) -> None:
        self.called = 0

    def request(self, frame: Frame, session: Connection) -> None:
        self.called += 1

    def response(self, frame: Frame, request: Pending, session: Connection) -> None:
        self.called += 1

    def notification(self, frame: Frame, session: Connection) -> None:
        self.called += 1


@pytest.mark.parametrize(("direction", "line"), [
    (A, b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"n":1e3}}\n'),
    (C, b'{"jsonrpc":"2.0","id":1,"result":{"n":1e3}}\n'),
    (C, b'{"jsonrpc":"2.0","method":"session/update","params":{"n":1e3}}\r\n'),
])
def test_a_hook_that_returns_nothing_passes_the_line_as_it_came(direction: Direction, line: bytes) -> None:
    """None is PASS: the very bytes go on, and the rules after it are shown the message."""
    first, second = Nothing(), Nothing()
    relay = Relay([first, second], strict=True)
    relay.feed(A, b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}\n')  # what the response answers
    (fwd,) = relay.feed(direction, line)
    assert (fwd.verdict, fwd.rules, fwd.data is line) == (Verdict.PASS, (), True)
    assert (first.called, second.called) == (2, 2)


def test_a_rule_is_named_after_its_class_unless_it_says() -> None:
    class NoUsage(Rule):
        pass

    class Named(Rule):
        name = "named"

    assert (NoUsage().name, Named().name, Step("s", "pass").name) == ("NoUsage", "named", "s")


def test_a_failing_rule_is_said_once_and_each_traceback_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    """However often it raises, one warning (the default verbosity shows it), and the line
    goes on as it came, recorded as an error of that rule."""
    line = orjson.dumps(REQUEST) + b"\n"
    relay = Relay([Returns("PASS")])
    with caplog.at_level(logging.DEBUG, "acp_bridge.relay"):
        forwards = [fwd for _ in range(3) for fwd in relay.feed(A, line.replace(b'"id":1', b'"id":' + str(_).encode()))]
    assert [(f.verdict, f.rules, f.error) for f in forwards] == [
        (Verdict.ERROR, ("Returns",), "TypeError: returned 'PASS', not an outcome (PASS, DROP, Replace)")] * 3
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "rule 'Returns' failed: TypeError: returned 'PASS', not an outcome (PASS, DROP, Replace), on "
        "<Frame -> request session/new 70B>; the line went on as it came (its further failures are not "
        "reported; -vv shows each, with its traceback)"]
    assert [r.exc_info is not None for r in caplog.records if r.levelno == logging.DEBUG] == [True] * 3
    assert relay.failures == {"Returns": 3}


@pytest.mark.parametrize(("error", "said"), [
    (SystemExit(3), "SystemExit: 3"),
    (GeneratorExit(), "GeneratorExit: "),
    (BaseException("odd"), "BaseException: odd"),
])
def test_a_rule_that_calls_exit_fails_like_any_other(error: BaseException, said: str) -> None:
    class Exits(Rule):
        def request(self, frame: Frame, session: Connection) -> Outcome:
            raise error

    raw = orjson.dumps(REQUEST) + b"\n"
    (fwd,) = Relay([Exits()]).feed(A, raw)
    assert (fwd.verdict, fwd.data, fwd.rules, fwd.error) == (Verdict.ERROR, raw, ("Exits",), said)


def test_ctrl_c_while_a_rule_runs_is_not_that_rule_failing() -> None:
    class Interrupted(Rule):
        def request(self, frame: Frame, session: Connection) -> Outcome:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Relay([Interrupted()]).feed(A, orjson.dumps(REQUEST) + b"\n")


def test_what_a_rule_raises_is_said_in_brief(caplog: pytest.LogCaptureFixture) -> None:
    """A rule that raises with a whole message in its text (`ValueError(f"odd: {msg}")`):
    its stderr line and each failing line's record carry the first ERROR_SHOWN characters."""
    class Loud(Rule):
        def request(self, frame: Frame, session: Connection) -> Outcome:
            raise ValueError("x" * 1_000_000)

    raw = orjson.dumps(REQUEST) + b"\n"
    with caplog.at_level(logging.WARNING, "acp_bridge.relay"):
        (fwd,) = Relay([Loud()]).feed(A, raw)
    assert fwd.error == "ValueError: " + "x" * ERROR_SHOWN + "... (1000000 characters)"
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning.startswith(f"rule 'Loud' failed: {fwd.error}, on <Frame")


class DropsWhatItSees(Rule):
    """Trusts its triggers as docs/rules.md says it may: drops every notification shown to it."""

    triggers = EVERY_LINE  # each instance names its own, as a [[rewrite]] table does

    def __init__(self, name: str, trigger: bytes) -> None:
        self.name, self.triggers = name, (trigger,)

    def notification(self, frame: Frame, session: Connection) -> Outcome:
        return DROP


@pytest.mark.parametrize(("text", "dropped_by"), [
    ('"kind":"usage_update"', "usage"),  # its own trigger
    ('"kind":"plan"', "plan"),  # the other rule's: not shown to "usage", which comes first
    ('"kind":"other"', None),  # neither: not parsed at all
    ('"kind":"\\u0070lan"', "usage"),  # an escape could spell any trigger: shown to every rule
])
def test_a_notification_is_shown_only_to_the_rules_whose_triggers_it_holds(text: str, dropped_by: str | None) -> None:
    relay = Relay([DropsWhatItSees("usage", b'"usage_update"'), DropsWhatItSees("plan", b'"plan"')])
    raw = b'{"jsonrpc":"2.0","method":"session/update","params":{' + text.encode() + b"}}\n"
    (fwd,) = relay.feed(C, raw)
    assert (fwd.verdict, fwd.rules) == ((Verdict.DROP, (dropped_by,)) if dropped_by else (Verdict.PASS, ()))


def test_a_change_that_cannot_be_written_is_said_once_per_rule(caplog: pytest.LogCaptureFixture) -> None:
    """Garbage in a Replace (an object JSON has no form for) fails open, and stderr names
    the rule: once for each rule, however often, so one rule's does not hide another's."""
    class Garbage(Rule):
        def __init__(self, name: str) -> None:
            self.name = name

        def request(self, frame: Frame, session: Connection) -> Outcome:
            return Replace({**(frame.msg or {}), "x": object()}) if frame.method == self.name else PASS

    relay = Relay([Garbage("a"), Garbage("b")])
    with caplog.at_level(logging.WARNING, "acp_bridge.relay"):
        for n, method in enumerate(["a", "a", "b"]):
            (fwd,) = relay.feed(A, b'{"jsonrpc":"2.0","id":%d,"method":"%s"}\n' % (n, method.encode()))
            assert (fwd.verdict, fwd.rules) == (Verdict.ERROR, (method,))
    assert [r.getMessage() for r in caplog.records] == [
        f"what the rules ({name}) made of a message cannot be written back (Type is not JSON serializable: "
        "object); it was forwarded as it came, unchanged (further ones are not reported)" for name in "ab"]


# -- a rule's failure that cannot even be described: still that rule's failure -----------------


class _NoRepr:
    def __repr__(self) -> str:
        raise ValueError("no repr")


class _NoStr(Exception):
    def __str__(self) -> str:
        raise ValueError("no str")


def _nested(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth):
        value = [value]
    return value


class Raises(Rule):
    def request(self, frame: Frame, session: Connection) -> Outcome:
        raise _NoStr


@pytest.mark.parametrize(("rule", "detail"), [
    (Returns(_NoRepr()), "TypeError: returned <_NoRepr instance>, not an outcome (PASS, DROP, Replace)"),
    (Returns(_nested(100_000)), "TypeError: returned [[[[...]]]], not an outcome (PASS, DROP, Replace)"),
    (Returns(Replace({}, then=(_NoRepr(),))), "TypeError: then= holds <_NoRepr instance>, not an Emit(Direction, dict)"),  # type: ignore[arg-type]
    (Returns(Replace({}, before=(_nested(100_000),))), "TypeError: before= holds [[[[...]]]], not an Emit(Direction, dict)"),  # type: ignore[arg-type]
    (Raises(), "_NoStr: <str() failed>"),
], ids=["repr raises", "nested 100,000 deep", "then= repr raises", "before= nested", "str raises"])
def test_a_failure_whose_value_cannot_be_shown_still_fails_open_naming_the_rule(rule: Rule, detail: str) -> None:
    """What a rule returned, or raised, is shown in brief; when it cannot be shown (its repr
    raises, or recurses past Python's limit) the line still goes on as it came, recorded as
    that rule's failure; the description escaped the relay as an exception of its own."""
    line = orjson.dumps(REQUEST) + b"\n"
    (fwd,) = Relay([rule]).feed(A, line)
    assert (fwd.verdict, fwd.data, fwd.rules, fwd.error) == (Verdict.ERROR, line, (rule.name,), detail)
    with pytest.raises(RuleError) as raised:
        Relay([rule], strict=True).feed(A, line)
    assert str(raised.value) == f"rule {rule.name!r} failed: {detail}"
