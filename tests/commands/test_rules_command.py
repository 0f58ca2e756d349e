"""`acp-bridge rules [RUN OPTIONS]`: the rules a configuration would run, in order, with where
each comes from; and bad rule input, one line and exit 2, through `rules` and `check-config`
(no agent is started by either)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from acp_bridge.commands import main
from tests.conftest import keeper

RULE = "from acp_bridge.rules import Rule\nclass {cls}(Rule):\n    pass\nrules = [{cls}()]\n"
TABLES = '[[rewrite]]\nupdate = "usage_update"\ndrop = true\n\n[[rewrite]]\nname = "tag"\nmethod = "x"\nremove = ["/a"]\n'


def test_the_listing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in_file.py").write_text(RULE.format(cls="InFile"))
    (tmp_path / "given.py").write_text(RULE.format(cls="Given"))
    (tmp_path / "c.toml").write_text('[rules]\nfiles = ["in_file.py"]\n\n' + TABLES)
    result = CliRunner().invoke(main, ["rules", "-c", "c.toml", "--rule", "given.py", "--system-prompt", "x",
                                       "--", "my-agent"])
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout.splitlines() == [
        " 1. suggestions      built-in",
        " 2. system-prompt    built-in",
        " 3. commands-mirror  built-in",
        " 4. rewrite-1        c.toml:4 [[rewrite]] #1",
        " 5. tag              c.toml:8 [[rewrite]] #2",
        " 6. InFile           in_file.py ([rules] files)",  # beside c.toml, given relative to here
        " 7. Given            given.py (--rule)",
    ]
    assert CliRunner().invoke(main, ["rules", "--no-suggestions", "--no-commands-mirror"]).stdout == \
        "no rules: every line goes through as it came\n"


@pytest.mark.parametrize(("name", "text", "error"), [
    ("missing.py", None, "{path}: rule file not found"),
    ("syntax.py", "x = (\n", "{path}:1: syntax error: '(' was never closed"),
    ("raises.py", "import json\njson.loads('{')\n", "{path}:2: loading it raised JSONDecodeError: Expecting property "
                                                     "name enclosed in double quotes: line 1 column 2 (char 1)"),
    ("empty.py", "", "{path}: defines no rules: end it with `rules = [MyRule()]`, a list of rule instances"),
    ("notlist.py", "rules = {}\n", "{path}: `rules` is a dict, not a list of rules"),
    ("nothing.py", "rules = []\n", "{path}: `rules` is empty: a rule file that runs nothing is a "
                                    "mistake; list at least one rule, `rules = [MyRule()]`"),
    ("notrule.py", "rules = [object()]\n", "{path}: rules[0] is a object, not a rule (an instance of "
                                           "acp_bridge.rules.Rule)"),
])
@pytest.mark.parametrize("how", ["rules --rule", "check-config"])
def test_bad_rule_files_are_one_line_and_exit_2(tmp_path: Path, name: str, text: str | None, error: str,
                                                 how: str) -> None:
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    if how == "check-config":
        config = tmp_path / "c.toml"
        config.write_text(f'[rules]\nfiles = ["{name}"]\n')
        result = CliRunner().invoke(main, ["check-config", str(config)])
    else:
        result = CliRunner().invoke(main, ["rules", "--rule", str(path)])
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"acp-bridge: {error.format(path=path)}\n"


def test_a_bad_table_is_one_line_and_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[[rewrite]]\nupdate = "x"\nwhere = { "/a" = 1 }\n')
    for args in (["rules", "-c", str(config)], ["check-config", str(config)]):
        result = CliRunner().invoke(main, args)
        assert (result.exit_code, result.stderr) == (2, f"acp-bridge: {config}: rewrite[1] (line 1): does nothing: "
                                                        "give drop = true, set = {...} or remove = [...]\n")


def test_run_refuses_a_bad_rule_before_the_agent_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from acp_bridge.commands import run

    started: list[object] = []
    monkeypatch.setattr(run, "run_and_report", keeper(started))
    missing = tmp_path / "missing.py"
    result = CliRunner().invoke(main, ["run", "--rule", str(missing), "--", "my-agent"])
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", f"acp-bridge: {missing}: rule file not found\n")
    assert started == []


def test_the_stray_output_repair_is_listed_when_on() -> None:
    """`--stray-output stderr` is a built-in repair like `--close-tool-calls`: listed where it
    acts, first, since an agent line that is no JSON object is diverted before any rule sees it."""
    args = ["rules", "--no-suggestions", "--no-commands-mirror", "--close-tool-calls"]
    on = CliRunner().invoke(main, [*args, "--stray-output", "stderr"])
    assert (on.exit_code, on.stderr) == (0, "")
    assert on.stdout.splitlines() == [
        " 1. stray-output      built-in",
        " 2. close-tool-calls  built-in",
    ]
    assert CliRunner().invoke(main, [*args, "--stray-output", "forward"]).stdout.splitlines() == [
        " 1. close-tool-calls  built-in",
    ]
    assert CliRunner().invoke(main, ["rules", "--no-suggestions", "--no-commands-mirror", "--stray-output",
                                     "stderr"]).stdout == " 1. stray-output  built-in\n"
