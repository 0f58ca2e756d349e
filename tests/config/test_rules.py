"""The rules a configuration runs (config/rules.py): their order and origins, rule files and
entry points loaded, and every bad input one `ConfigError` naming the file (and line)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from acp_bridge.config import (
    CommandsConfig,
    Config,
    RepairConfig,
    RewriteConfig,
    RulesConfig,
    SystemPromptConfig,
)
from acp_bridge.config.rules import RESERVED, load_rule_file, load_rules
from acp_bridge.errors import ConfigError

RULE = """\
from acp_bridge.rules import PASS, Rule

class {cls}(Rule):
    def request(self, msg, session):
        return PASS

rules = [{cls}()]
"""


def rule_file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_order_and_where_each_comes_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Built-ins, [[rewrite]] tables, [rules] enable, [rules] files, each --rule."""
    add_entry_point(tmp_path, monkeypatch, "from-pkg", "ep_rules:make", RULE.format(cls="FromPackage") +
                    "def make():\n    return rules\n")
    a, b = rule_file(tmp_path, "a.py", RULE.format(cls="A")), rule_file(tmp_path, "b.py", RULE.format(cls="B"))
    config = Config(source="c.toml", rewrite=(RewriteConfig(name="t1", update="x", drop=True, line=3),
                                              RewriteConfig(name="t2", update="y", drop=True)),
                    rules=RulesConfig(files=(str(a),), enable=("from-pkg",), command_line=(str(b),)))
    assert [(one.rule.name, one.origin) for one in load_rules(config)] == [
        ("suggestions", "built-in"),
        ("commands-mirror", "built-in"),
        ("t1", "c.toml:3 [[rewrite]] #1"),
        ("t2", "c.toml [[rewrite]] #2"),
        ("FromPackage", "entry point from-pkg (ep_rules:make)"),
        ("A", f"{a} ([rules] files)"),
        ("B", f"{b} (--rule)"),
    ]


def add_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str, module: str) -> None:
    """An installed distribution offering `name` in the group acp_bridge.rules."""
    dist = tmp_path / "site" / "rulepkg-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: rulepkg\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[acp_bridge.rules]\n{name} = {value}\n")
    (tmp_path / "site" / f"{value.split(':', maxsplit=1)[0]}.py").write_text(module)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))


def test_an_entry_point_is_loaded_only_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    add_entry_point(tmp_path, monkeypatch, "one", "ep_one:Only", RULE.format(cls="Only"))
    assert [one.rule.name for one in load_rules(Config())] == ["suggestions", "commands-mirror"]  # installed, not named
    assert "ep_one" not in sys.modules
    loaded = load_rules(Config(rules=RulesConfig(enable=("one",))))
    assert [one.rule.name for one in loaded] == ["suggestions", "commands-mirror", "Only"]  # a class: made with no arguments
    with pytest.raises(ConfigError) as raised:
        load_rules(Config(source="c.toml", rules=RulesConfig(enable=("two",))))
    assert str(raised.value) == ("c.toml: rules.enable: no installed package offers a rule named 'two' "
                                 "(entry point group acp_bridge.rules)")


@pytest.mark.parametrize(("text", "error"), [
    ("def f(:\n", "{path}:1: syntax error: invalid syntax"),
    ("x = 1\nraise RuntimeError('no')\n", "{path}:2: loading it raised RuntimeError: no"),
    ("import acp_bridge.nope\n", "{path}:1: loading it raised ModuleNotFoundError: No module named 'acp_bridge.nope'"),
    ("import sys\nsys.exit(3)\n", "{path}:2: loading it raised SystemExit: 3"),
    ("x = 1\nraise BaseException('odd')\n", "{path}:2: loading it raised BaseException: odd"),
    ("class E(Exception):\n    def __str__(self):\n        raise ValueError\nraise E()\n",  # a traceback before
     "{path}:4: loading it raised E: <str() failed>"),
    ("raise ValueError('v' * 600)\n", "{path}:1: loading it raised ValueError: " + "v" * 500 + "... (600 characters)"),
    ("x = 1\n", "{path}: defines no rules: end it with `rules = [MyRule()]`, a list of rule instances"),
    ("rules = 5\n", "{path}: `rules` is a int, not a list of rules"),
    ("from acp_bridge.rules import Rule\nclass R(Rule): pass\nrules = R()\n", "{path}: `rules` is a R, not a list of rules"),
    ("from acp_bridge.rules import Rule\nclass R(Rule): pass\nrules = [R]\n",
     "{path}: rules[0] is the class R, not an instance: write R()"),
    ("rules = ['x']\n", "{path}: rules[0] is a str, not a rule (an instance of acp_bridge.rules.Rule)"),
    ("from acp_bridge.rules import Rule\nclass R(Rule):\n    name = ''\nrules = [R()]\n",
     "{path}: rules[0] has the name '': a rule's name is a non-empty string without control characters"),
    ("from acp_bridge.rules import Rule\nclass R(Rule):\n    triggers = ('x',)\nrules = [R()]\n",
     "{path}: rules[0] (R) has triggers ('x',): a tuple of bytes, such as (b'\"usage_update\"',)"),
    ("from acp_bridge.rules import Rule\nclass R(Rule):\n    def notification(self, m, s): pass\nrules = [R()]\n",
     "{path}:2: loading it raised TypeError: R overrides notification() but declares no triggers: name the "
     "bytes a notification it acts on must contain, or use EVERY_LINE"),
    ("from acp_bridge.rules import Rule\nclass R(Rule):\n    @property\n    def name(self):\n        return 1 / 0\n"
     "rules = [R()]\n", "{path}: rules[0] cannot be read: ZeroDivisionError: division by zero"),
    ("x = '\0'\n", "{path}: syntax error: source code string cannot contain null bytes"),
])
def test_bad_rule_files(tmp_path: Path, text: str, error: str) -> None:
    path = rule_file(tmp_path, "r.py", text)
    with pytest.raises(ConfigError) as raised:
        load_rule_file(path)
    assert str(raised.value) == error.format(path=path)


def test_what_is_not_a_rule_file(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    for path, error in [(tmp_path / "none.py", "rule file not found"),
                        (tmp_path, "not a regular file (a rule file is a Python file)"),
                        (fifo, "not a regular file (a rule file is a Python file)")]:
        with pytest.raises(ConfigError) as raised:
            load_rule_file(path)
        assert str(raised.value) == f"{path}: {error}"


def test_two_rules_with_one_name(tmp_path: Path) -> None:
    a = rule_file(tmp_path, "a.py", RULE.format(cls="Same"))
    with pytest.raises(ConfigError) as raised:
        load_rules(Config(rules=RulesConfig(files=(str(a),), command_line=(str(a),))))
    assert str(raised.value) == (f"{a} (--rule): a rule named 'Same' is already loaded from {a} ([rules] files): "
                                 "give it a `name` of its own")


def test_what_a_rule_file_raises_is_said_on_one_line(tmp_path: Path) -> None:
    path = rule_file(tmp_path, "r.py", "raise ValueError('two\\nlines \\x1b[31mred')\n")
    with pytest.raises(ConfigError) as raised:
        load_rule_file(path)
    assert str(raised.value) == f"{path}:1: loading it raised ValueError: two\\nlines \\u001b[31mred"


def test_the_bridges_own_names_are_not_a_rules(tmp_path: Path) -> None:
    """A rule named after a built-in (off or on), the bridge's answers or stray output would
    be counted as theirs in `check`, `stats` and telemetry."""
    path = rule_file(tmp_path, "r.py", RULE.format(cls="Mine").replace("def request", "name = 'bridge'\n    def request"))
    with pytest.raises(ConfigError) as raised:
        load_rules(Config(rules=RulesConfig(files=(str(path),))))
    assert str(raised.value) == (f"{path} ([rules] files): 'bridge' is the name of the bridge's own work, which "
                                 "captures and telemetry show it by: give the rule a `name` of its own")
    table = RewriteConfig(name="close-tool-calls", update="usage_update", drop=True)
    with pytest.raises(ConfigError) as raised:
        load_rules(Config(source="c.toml", rewrite=(table,)))
    assert str(raised.value).startswith("c.toml [[rewrite]] #1: 'close-tool-calls' is the name of the bridge's own")
    every = Config(repair=RepairConfig(close_tool_calls=True), commands=CommandsConfig(mirror_initial=True),
                   system_prompt=SystemPromptConfig(text="x"))
    assert {one.rule.name for one in load_rules(every)} | {"bridge", "stray-output"} == RESERVED
