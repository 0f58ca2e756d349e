"""The built-ins' declarations (core/rewrites/options.py): one name, one switch and the options of
each built-in, declared beside it as data, and the stray-output repair's decisions and what the
shell says of them (core/rewrites/stray_output.py). Table-driven on the pure core."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from acp_bridge.core.forward import Forward, Verdict
from acp_bridge.core.lines import Opaque
from acp_bridge.core.messages import Direction, classify
from acp_bridge.core.rewrites import built_ins
from acp_bridge.core.rewrites.options import CHOICE, FILE, FLAG, OFF_FLAG, TEXT, BuiltIn, Option, value_at
from acp_bridge.core.rewrites.stray_output import StrayOutput

A, C = Direction.TO_AGENT, Direction.TO_CLIENT


def test_the_built_ins_in_their_order_with_the_names_their_work_carries() -> None:
    assert [built_in.name for built_in in built_ins()] == [
        "stray-output", "suggestions", "system-prompt", "commands-mirror", "close-tool-calls"]
    assert [built_in.rule is None for built_in in built_ins()] == [True, False, False, False, False]


def test_every_option_is_spelt_from_its_name_once() -> None:
    options = [option for built_in in built_ins() for option in built_in.options]
    assert [(o.flag, o.envvar) for o in options] == [
        ("--" + o.name.replace("_", "-"), "ACP_BRIDGE_" + o.name.upper()) for o in options]
    assert len({o.name for o in options}) == len(options)
    assert all(o.key.count(".") == 1 for o in options)


def test_a_rule_named_by_its_path_is_loaded_when_it_is_made() -> None:
    [prompt] = [built_in for built_in in built_ins() if built_in.name == "system-prompt"]
    assert isinstance(prompt.rule, str)  # a run without a prompt does not import the rule

    @dataclass(frozen=True)
    class Prompt:
        text: str | None = "be brief"
        mode: str = "append"
        client_prompt: str = "merge"
        on_unsupported: str = "auto"
        strict: bool = False

    @dataclass(frozen=True)
    class Settings:
        system_prompt: Prompt = Prompt()

    rule = prompt.make(Settings())
    assert (type(rule).__name__, rule.name, rule.config) == ("SystemPrompt", "system-prompt", Settings().system_prompt)


@dataclass(frozen=True)
class Table:
    on: Any = None


@dataclass(frozen=True)
class Settings:
    table: Table = Table()


@pytest.mark.parametrize(("value", "off", "on"), [
    (True, (False, None), True),
    (False, (False, None), False),
    (None, (False, None), False),
    ("text", (False, None), True),
    ("", (False, None), True),  # only the values said to be off are
    ("forward", ("forward",), False),
    ("stderr", ("forward",), True),
])
def test_a_built_in_is_on_unless_its_switch_holds_an_off_value(value: Any, off: tuple[Any, ...], on: bool) -> None:
    built_in = BuiltIn("x", switch="table.on", off=off)
    assert built_in.is_on(Settings(Table(value))) is on
    assert value_at(Settings(Table(value)), "table.on") == value


@pytest.mark.parametrize(("kind", "said"), [
    (FLAG, "Mend it. [config: repair.mend = true]"),
    (OFF_FLAG, "Mend it. [config: repair.mend = false]"),
    (CHOICE, "Mend it. [config: repair.mend]"),
    (TEXT, "Mend it. [config: repair.mend]"),
    (FILE, "Mend it. [config: repair.mend]"),
])
def test_the_help_says_where_the_file_sets_it(kind: str, said: str) -> None:
    option = Option("mend", "repair.mend", "--mend", "ACP_BRIDGE_MEND", "Mend it.", kind)
    assert (option.full_help(), option.table, option.field) == (said, "repair", "mend")


@pytest.mark.parametrize(("kind", "given", "value"), [
    (FLAG, True, True), (FLAG, False, False), (OFF_FLAG, True, False), (OFF_FLAG, False, True),
    (CHOICE, "stderr", "stderr"),
])
def test_what_a_layer_gives_is_the_keys_value(kind: str, given: Any, value: Any) -> None:
    assert Option("x", "t.x", "--x", "ACP_BRIDGE_X", "", kind).value(given) == value


# -- stray output: what the shell says of each forward ---------------------------------------------


def said(stray: StrayOutput, *forwards: Forward) -> list[tuple[bool, str] | None]:
    return [stray.said(fwd) for fwd in forwards]


def other(direction: Direction, raw: bytes) -> Forward:
    return Forward(direction, raw, raw, Verdict.OTHER, classify(direction, raw))


SHOWN = "acp-bridge: agent stdout (not forwarded): "
WARNING = ("the agent wrote a line that is not JSON-RPC to stdout: {!r}. It was forwarded as it is, but strict "
           "clients may fail on it: agents must log to stderr, not stdout (further such lines are not "
           "reported; -vv and a capture show them)")


def test_a_diverted_line_is_shown_and_a_blank_one_is_not() -> None:
    stray, out = StrayOutput(divert=True), list[Forward]()
    for raw in (b"Starting\x1b[0m v1\n", b"  \n"):
        assert stray.line(classify(C, raw), out)
    assert not stray.line(classify(C, b'{"jsonrpc":"2.0","method":"x"}\n'), out)
    assert said(stray, *out) == [(True, SHOWN + "Starting\\u001b[0m v1"), None]


def test_a_diverted_long_line_is_shown_once_from_its_first_piece() -> None:
    stray, out = StrayOutput(divert=True), list[Forward]()
    pieces = [Opaque(b"banner " * 200, False), Opaque(b"x" * 100 + b"\n", True), Opaque(b"second", False),
              Opaque(b"\n", True), Opaque(b'{"a":', False), Opaque(b"1}\n", True)]
    taken = [stray.piece(piece, out) for piece in pieces]
    assert taken == [True, True, True, True, False, False]
    assert said(stray, *out) == [
        (True, SHOWN + ("banner " * 200)[:500] + " ... (a line over the parse limit)"), None,
        (True, SHOWN + "second ... (a line over the parse limit)"), None]
    assert said(stray, Forward(C, b"{", b"{", Verdict.OPAQUE)) == [None]  # a long line forwarded


def test_the_first_stray_line_forwarded_is_warned_about_once() -> None:
    stray = StrayOutput()
    assert said(stray, other(A, b"client junk\n"), other(C, b"\n"), other(C, b"[1, 2]\n"),
                other(C, b"Starting agent\n"), other(C, b"again\n")) == [
        None, None, None, (False, WARNING.format("Starting agent")), None]
    assert stray.warned


def test_forwarded_lines_other_than_stray_output_are_not_looked_at() -> None:
    stray = StrayOutput()
    line = b'{"jsonrpc":"2.0","method":"x"}\n'
    assert said(stray, Forward(C, line, line, Verdict.PASS), Forward(C, b"", line, Verdict.DROP)) == [None, None]
    assert not stray.warned
