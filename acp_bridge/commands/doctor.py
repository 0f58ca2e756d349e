"""`acp-bridge doctor`: an agent checked as an editor would start it, or an editor's agent
entries checked (docs/editors.md).

Owns: the command's options (the run options are `run`'s own declarations, copied, settled by
`run`'s config layering for the predictions and passed on as typed to the bridge it starts),
finding the agent (its full path, or why not), the report (text or `--json`) and the exit
statuses: 0 healthy, 1 problems found, 2 usage. Must never: leave the agent running when it
returns, or write to the editor's settings.
"""

from __future__ import annotations

import copy
import math
from typing import Any, NoReturn

import click

from acp_bridge import __version__
from acp_bridge.commands import EXIT_USAGE
from acp_bridge.commands.run import resolve_config
from acp_bridge.commands.run import run as run_command
from acp_bridge.commands.setup import WRITTEN_AS_GIVEN, bridge_command, read_settings, resolve_program, run_args
from acp_bridge.core.printable import printable
from acp_bridge.errors import ConfigError
from acp_bridge.setup import entries as e

EXIT_PROBLEMS = 1


def fail(message: str, status: int = EXIT_USAGE) -> NoReturn:
    click.echo(printable(f"acp-bridge: doctor: {message}", quote_backslash=False), err=True)
    raise SystemExit(status)


def _seconds(ctx: click.Context, param: click.Parameter, value: float) -> float:
    if math.isnan(value):
        raise click.BadParameter("nan is not a number of seconds")
    return value


def _dump(value: Any) -> str:
    import orjson

    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    except orjson.JSONEncodeError:  # a lone surrogate (a settings file's `\ud800`): only escaped JSON holds it
        import json

        return json.dumps(value, indent=2)


@click.command("doctor", short_help="Start an agent through the bridge and say whether it works.")
@click.argument("agent", nargs=-1, type=click.UNPROCESSED, metavar="-- AGENT [ARG...]")
@click.option("--protocol", type=click.Choice(["1", "2"]), default="1", show_default=True,
              help="The ACP protocol version to ask for in initialize.")
@click.option("--session", "with_session", is_flag=True,
              help="Also open a session (session/new in a fresh temporary folder; closed with session/close "
                   "when the agent offers it) to see the commands it advertises.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=30.0, show_default=True,
              metavar="S", callback=_seconds, help="How long each answer may take.")
@click.option("--json", "as_json", is_flag=True, help="The same facts as one JSON object, for scripts.")
@click.option("--editor", type=click.Choice(e.WRITTEN), help="Instead of an agent: check EDITOR's agent "
                                                            "entries (which go through the bridge, whether "
                                                            "their commands can be started).")
@click.option("--settings", metavar="FILE", type=click.Path(dir_okay=False),
              help="With --editor: the settings file to read instead of the editor's own.")
@click.pass_context
def doctor(ctx: click.Context, /, agent: tuple[str, ...], protocol: str, with_session: bool, timeout: float,
           as_json: bool, editor: str | None, settings: str | None, config_file: str | None,
           **options: Any) -> None:
    """Start AGENT through the bridge as an editor would, and say whether it works.

    It sends initialize (and with --session, session/new), then reports how long the agent
    took, its agentInfo, protocol version and capabilities, the system-prompt dialect and
    what the bridge does with suggestions for each kind of client, the commands it
    advertises, and each problem with its fix (not found, exits at once, answers nothing,
    answers with something that is not ACP or with another id, writes a line too long to
    read, rejects the protocol version, writes a banner to stdout). The agent is stopped
    before doctor exits: SIGKILL if it is still running a second after SIGTERM. Exit status
    0: healthy; 1: problems found; 2: a usage error.

    With --editor, it lists EDITOR's agent entries instead, and whether each one's commands
    can be started: exit 0 when all can, 1 otherwise.
    """
    typed = run_args(ctx, {**options, "config_file": config_file})
    if editor is not None:
        if agent or typed:
            raise click.UsageError("--editor: takes no agent and no run options", ctx)
        ctx.exit(_check_editor(editor, settings, as_json))
    if settings is not None:
        raise click.UsageError("--settings: only with --editor", ctx)
    if not agent:
        raise click.UsageError("give the agent after --, or --editor EDITOR", ctx)
    try:
        config = resolve_config(ctx, config_file, agent, options)
    except ConfigError as exc:
        fail(str(exc))
    import trio

    from acp_bridge.setup.report import Probe, lines
    from acp_bridge.setup.report import as_json as facts

    program, warning = resolve_program(agent[0])
    if warning is not None:
        probe = Probe(command=list(agent), protocol=int(protocol), started=False,
                      start_error=warning.replace(WRITTEN_AS_GIVEN, ""))
    else:
        command = [*bridge_command(), e.RUN, *typed, e.SEPARATOR, program, *agent[1:]]
        try:
            probe = trio.run(partial_probe(command, [program, *agent[1:]], int(protocol), with_session, timeout,
                                           config.relay.parse_limit_mib))
        except KeyboardInterrupt:
            raise SystemExit(130) from None
    if as_json:
        click.echo(_dump(facts(probe, config.system_prompt, config.suggestions)))
    else:
        for line in lines(probe, config.system_prompt, config.suggestions):
            click.echo(line)
    ctx.exit(0 if not facts(probe, config.system_prompt, config.suggestions)["problems"] else EXIT_PROBLEMS)


def partial_probe(command: list[str], agent: list[str], protocol: int, with_session: bool, timeout: float,
                  max_line_mib: int = 16) -> Any:
    from acp_bridge.setup.probe import MIB, run_probe

    async def go() -> Any:
        probe = await run_probe(command, agent, protocol=protocol, with_session=with_session, timeout=timeout,
                                version=__version__, max_line=max_line_mib * MIB)
        probe.max_line_mib = max_line_mib
        return probe
    return go


def _check_editor(editor: str, settings: str | None, as_json: bool) -> int:
    path, loaded, document = read_settings(editor, settings, fail)
    present = document.entries()
    rows: list[dict[str, Any]] = []
    for name, entry in present.items():
        through = e.bridged(entry)
        commands: list[str] = []
        if isinstance(entry, dict) and isinstance(entry.get("command"), str):
            commands.append(entry["command"])
            if through is not None and through.agent:
                commands.append(through.agent[0])
        checked = []
        for command in commands:
            found, warning = resolve_program(command)
            problem = None if warning is None else warning.replace(WRITTEN_AS_GIVEN, "")  # doctor writes nothing
            checked.append({"command": command, "path": found, "ok": warning is None, "problem": problem})
        registry = e.registry_entry(entry)
        rows.append({"name": name, "through_bridge": through is not None, "registry": registry,
                     "commands": checked, "ok": all(c["ok"] for c in checked)})
    ok = all(row["ok"] for row in rows)
    if as_json:
        click.echo(_dump({"editor": editor, "settings": str(path), "exists": loaded.text is not None,
                          "entries": rows, "ok": ok}))
        return 0 if ok else EXIT_PROBLEMS
    def show(text: Any) -> str:
        return printable(str(text), quote_backslash=False)

    if loaded.text is None:
        click.echo(f"{show(path)}: no such file (no agent entries)")
    elif not rows:
        click.echo(f"{show(path)}: no agent entries")
    for row in rows:
        how = ("through the bridge" if row["through_bridge"] else
               "installed by the editor (registry), not through the bridge" if row["registry"] else
               "not through the bridge")
        click.echo(f"{show(row['name'])}: {how}")
        for c in row["commands"]:
            click.echo(f"  {show(c['command'])}: " + (f"ok ({show(c['path'])})" if c["ok"] else show(c["problem"])))
    click.echo("all entries can start" if ok else "some entries cannot start")
    return 0 if ok else EXIT_PROBLEMS


# The run options, as `run` declares them (copies: click keeps state on a parameter).
doctor.params.extend(copy.copy(param) for param in run_command.params if isinstance(param, click.Option))
