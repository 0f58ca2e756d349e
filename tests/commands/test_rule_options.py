"""`run`'s options made from the built-ins' declarations (commands/run.py): each declared option
is an option of `run`, `setup`, `doctor` and `rules` as declared, and a new repair's declaration
alone gives its flag, its variable, its help and its value in each layer."""

from __future__ import annotations

from typing import Any

import click
import pytest
from click.testing import CliRunner

from acp_bridge.commands.doctor import doctor
from acp_bridge.commands.rules import rules
from acp_bridge.commands.run import _rule_settings, click_option, layer, rule_options, run
from acp_bridge.commands.setup import PATH_OPTIONS, setup
from acp_bridge.core.rewrites import built_ins
from acp_bridge.core.rewrites.options import CHOICE, FILE, FLAG, OFF_FLAG, Option

DECLARED = [option for built_in in built_ins() for option in built_in.options]
OPTIONS = [pytest.param(option, id=option.name) for option in DECLARED]


@pytest.mark.parametrize("command", [run, setup, doctor, rules], ids=lambda c: c.name)
@pytest.mark.parametrize("option", OPTIONS)
def test_each_declared_option_is_a_run_option_as_declared(command: click.Command, option: Option) -> None:
    [param] = [p for p in command.params if p.name == option.name]
    assert isinstance(param, click.Option)
    envvar = None if command is setup else option.envvar  # setup writes only what is typed
    assert (param.opts, param.envvar, param.help, param.is_flag) == (
        [option.flag], envvar, option.full_help(), option.is_flag)
    if option.kind == CHOICE:
        assert isinstance(param.type, click.Choice) and tuple(param.type.choices) == option.choices
    if option.kind == FILE:
        assert option.name in PATH_OPTIONS


def test_run_lists_them_where_they_were_before_the_declarations() -> None:
    names = [p.name for p in run.params if isinstance(p, click.Option)]
    assert names == ["config_file", "capture", "system_prompt", "system_prompt_file", "system_prompt_mode",
                     "unlock_legacy_agent", "no_suggestions", "no_health", "no_commands_mirror",
                     "close_tool_calls", "stray_output", "strict", "log_file", "otlp", "otlp_content",
                     "rule_files", "verbose", "quiet"]
    assert [o.name for o in rule_options()] == [n for n in names if n in {o.name for o in DECLARED}]


MEND = Option("mend_things", "repair.mend_things", "--mend-things", "ACP_BRIDGE_MEND_THINGS",
              "Mend what the agent broke.", FLAG, default=False)
KEEP = Option("no_keep_things", "repair.keep_things", "--no-keep-things", "ACP_BRIDGE_NO_KEEP_THINGS",
              "Let go of what the agent kept.", OFF_FLAG, default=True)


@click.command()
@click.pass_context
def probe(ctx: click.Context, /, **options: Any) -> None:
    for which in (2, 1):  # the command line, then the environment
        settings: dict[str, Any] = {}
        _rule_settings(ctx, (MEND, KEEP), lambda name, which=which: options[name] if layer(ctx, name) == which
                       else None, settings)
        click.echo(f"{which}: {sorted(settings.items())}")


probe.params[:] = [click_option(MEND), click_option(KEEP)]


@pytest.mark.parametrize(("args", "env", "out"), [
    ([], {}, "2: []\n1: []\n"),
    (["--mend-things"], {}, "2: [('repair.mend_things', True)]\n1: []\n"),
    ([], {"ACP_BRIDGE_MEND_THINGS": "0"}, "2: []\n1: [('repair.mend_things', False)]\n"),
    ([], {"ACP_BRIDGE_MEND_THINGS": "yes"}, "2: []\n1: [('repair.mend_things', True)]\n"),
    (["--no-keep-things"], {"ACP_BRIDGE_MEND_THINGS": "on"},
     "2: [('repair.keep_things', False)]\n1: [('repair.mend_things', True)]\n"),
    ([], {"ACP_BRIDGE_NO_KEEP_THINGS": "off"}, "2: []\n1: [('repair.keep_things', True)]\n"),
])
def test_a_new_repairs_declaration_alone_gives_its_option_in_each_layer(args: list[str], env: dict[str, str],
                                                                          out: str) -> None:
    result = CliRunner().invoke(probe, args, env=env)
    assert (result.exit_code, result.output) == (0, out)


def test_a_new_repairs_help_says_its_variable_and_key() -> None:
    result = CliRunner().invoke(probe, ["--help"], terminal_width=200)
    assert result.output.splitlines()[3:6] == [
        "  --mend-things     Mend what the agent broke. [config: repair.mend_things = true]  [env var: "
        "ACP_BRIDGE_MEND_THINGS]",
        "  --no-keep-things  Let go of what the agent kept. [config: repair.keep_things = false]  [env var: "
        "ACP_BRIDGE_NO_KEEP_THINGS]",
        "  --help            Show this message and exit."]
