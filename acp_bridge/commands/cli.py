"""The command line: `acp-bridge run | show | stats | export | demo | check-config`.

Owns: option parsing, the precedence command line > ACP_BRIDGE_* environment > config file >
defaults, logging setup, and mapping outcomes to exit statuses. Must never: print anything
but protocol bytes to stdout while `run` is relaying (messages go to stderr or --log-file).
"""

from __future__ import annotations

import gc
import importlib
import logging
import sys
from pathlib import Path
from typing import Any

import click

from acp_bridge import __version__
from acp_bridge.config import Config, command_problem
from acp_bridge.config.layers import Overrides, PromptFile, PromptText, apply_overrides, load_config, settle
from acp_bridge.core.rewrites.settings import SYSTEM_PROMPT_MODES
from acp_bridge.errors import BridgeError, ConfigError
from acp_bridge.shell.logs import setup_logging

EXIT_USAGE = 2
EXIT_BRIDGE = 1

log = logging.getLogger("acp_bridge")


class BridgeGroup(click.Group):
    """The command group, with the capture readers loaded only when asked for.

    `run` is what editors start, often, so it should not pay for importing what `show`,
    `stats` and `export` need.
    """

    LAZY = ("show", "stats", "export", "check")
    LAZY_COMMANDS = (("replay", "acp_bridge.commands.replay"),)  # (name, module with COMMAND), loaded when asked for

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        """As click's, but a usage error is one line on stderr (spec/interface.md), exit 2, and
        `acp-bridge [RUN OPTIONS] -- AGENT` is short for `acp-bridge run [RUN OPTIONS] -- AGENT`
        (bridge-rules.md 0)."""
        args = list(sys.argv[1:] if args is None else args)
        if args[:1] == ["--"] or (args and self.is_run_option(args[0])):
            args.insert(0, "run")
        try:
            status = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:  # bare `acp-bridge`: the help
            click.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
            sys.exit(0)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else "acp-bridge"
            click.echo(f"acp-bridge: {exc.format_message()} (see '{where} --help')", err=True)
            sys.exit(EXIT_USAGE)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("acp-bridge: aborted", err=True)
            sys.exit(EXIT_BRIDGE)
        sys.exit(status if isinstance(status, int) else 0)

    def is_run_option(self, arg: str) -> bool:
        """Does `arg` start with an option of `run` (`--capture`, `--capture=x`, `-vv`, `-cFILE`)?
        The group's own options (`--help`, `--version`) are not among them."""
        command = self.commands.get("run")
        if command is None or not arg.startswith("-") or arg == "-":
            return False
        names = {name for param in command.params if isinstance(param, click.Option)
                 for name in (*param.opts, *param.secondary_opts)}
        return (arg.split("=", 1)[0] if arg.startswith("--") else arg[:2]) in names

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.LAZY, *dict(self.LAZY_COMMANDS)})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.LAZY and cmd_name not in self.commands:
            from acp_bridge.commands.captures import COMMANDS
            from acp_bridge.commands.check import check

            for command in (*COMMANDS, check):
                self.add_command(command)
        module = dict(self.LAZY_COMMANDS).get(cmd_name)
        if module is not None and cmd_name not in self.commands:
            self.add_command(importlib.import_module(module).COMMAND)
        return super().get_command(ctx, cmd_name)


@click.group(cls=BridgeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="acp-bridge")
def main() -> None:
    """acp-bridge: a transparent proxy between an ACP client (editor) and an ACP agent.

    It relays both stdio streams byte for byte, and on top of that translates prompt
    suggestions between the legacy and the new form, injects a configured system prompt,
    and can capture the traffic to a file. Start with `acp-bridge demo`.

    `acp-bridge [RUN OPTIONS] -- AGENT [ARG...]` is short for `acp-bridge run [RUN OPTIONS]
    -- AGENT [ARG...]`; see `acp-bridge run --help` for the options.
    """


class RunOption(click.Option):
    """An option of `run`: its ACP_BRIDGE_* variable shown in --help, and an invalid value
    blamed on the spelling that gave it (the option, or the variable), not on both."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("show_envvar", True)
        super().__init__(*args, **kwargs)

    def get_error_hint(self, ctx: click.Context | None) -> str:
        if ctx is not None and self.name is not None and isinstance(self.envvar, str):
            source = ctx.get_parameter_source(self.name)
            if source is not None and source.name == "ENVIRONMENT":
                return f"'{self.envvar}'"
        return click.Parameter.get_error_hint(self, ctx)


RUN_EPILOG = """
Settings: each option can also come from an ACP_BRIDGE_* variable (its [env var: ...]) and
from the config file (its [config: table.key]); the command line wins, then the environment,
then the file, then the default. In the environment a flag takes 1, true, yes or on, and 0,
false, no or off turns off what the file turned on. `acp-bridge check-config FILE` prints
what a file sets.
"""


@main.command(context_settings={"ignore_unknown_options": False}, epilog=RUN_EPILOG)
@click.option("-c", "--config", "config_file", type=click.Path(dir_okay=False), envvar="ACP_BRIDGE_CONFIG",
              cls=RunOption, help="TOML config file (see configs/ for ready-made ones).")
@click.option("--capture", metavar="PATH", envvar="ACP_BRIDGE_CAPTURE", cls=RunOption,
              help="Write the traffic as JSONL to PATH; {time} and {pid} are filled in. [config: capture.path]")
@click.option("--system-prompt", metavar="TEXT", envvar="ACP_BRIDGE_SYSTEM_PROMPT", cls=RunOption,
              help="System prompt text to inject into session setup. [config: system_prompt.text]")
@click.option("--system-prompt-file", metavar="FILE", envvar="ACP_BRIDGE_SYSTEM_PROMPT_FILE", cls=RunOption,
              help="Read the system prompt from FILE (UTF-8; trailing newlines dropped). Text or file: "
                   "the command line replaces the environment, which replaces the config file. "
                   "[config: system_prompt.file]")
@click.option("--system-prompt-mode", type=click.Choice(SYSTEM_PROMPT_MODES), envvar="ACP_BRIDGE_SYSTEM_PROMPT_MODE",
              cls=RunOption, help="append (default) adds to the agent's instructions; override replaces them. "
                                     "[config: system_prompt.mode]")
@click.option("--unlock-legacy-agent", is_flag=True, default=None, envvar="ACP_BRIDGE_UNLOCK_LEGACY_AGENT",
              cls=RunOption,
              help="Mark a new client as JetBrains AIR toward the agent so legacy agents send "
                   "suggestions (changes other output of those agents; see docs/suggestions.md). "
                   "[config: suggestions.unlock_legacy_agent = true]")
@click.option("--no-suggestions", is_flag=True, default=None, envvar="ACP_BRIDGE_NO_SUGGESTIONS", cls=RunOption,
              help="Leave prompt suggestions of either form untouched. [config: suggestions.enabled = false]")
@click.option("--no-health", is_flag=True, default=None, envvar="ACP_BRIDGE_NO_HEALTH", cls=RunOption,
              help="Turn off the protocol watchdog (findings in the log and the capture; see "
                   "docs/health.md). [config: health.enabled = false]")
@click.option("--strict", is_flag=True, default=None, envvar="ACP_BRIDGE_STRICT", cls=RunOption,
              help="Every strictness at once (tests, conformance runs): a rule that fails stops the "
                   "bridge, and implies system_prompt.strict (no silent downgrade of override to "
                   "append). Same as [bridge] strict; ACP_BRIDGE_STRICT=0 turns it off. [config: bridge.strict = true]")
@click.option("--log-file", type=click.Path(dir_okay=False), envvar="ACP_BRIDGE_LOG_FILE", cls=RunOption,
              help="Write the bridge's log to FILE instead of stderr. [config: bridge.log_file]")
@click.option("--otlp", is_flag=True, default=None, envvar="ACP_BRIDGE_OTLP", cls=RunOption,
              help="Send traces and metrics of the traffic to an OpenTelemetry collector (OTLP; the "
                   "OTEL_* variables say where). Needs the otel extra. See docs/telemetry.md. "
                   "[config: telemetry.enabled = true]")
@click.option("--otlp-content", is_flag=True, default=None, envvar="ACP_BRIDGE_OTLP_CONTENT", cls=RunOption,
              help="With --otlp, also send prompt text, replies and tool input and output (the capture's "
                   "redaction applied first); implies --otlp. [config: telemetry.content = true]")
@click.option("-v", "--verbose", count=True,
              help="More log: -v rewrites and drops, -vv every frame. [config: bridge.verbosity = 1 or 2]")
@click.option("-q", "--quiet", is_flag=True, help="Only errors in the log. [config: bridge.verbosity = -1]")
@click.argument("agent", nargs=-1, type=click.UNPROCESSED, metavar="-- AGENT [ARG...]")
@click.pass_context
def run(ctx: click.Context, /, config_file: str | None, agent: tuple[str, ...], **options: Any) -> None:
    """Run AGENT behind the bridge, relaying this process's stdio to it.

    Put the agent's command line after `--`, or set [agent] command in the config file.
    The exit status is the agent's (128+N if it died of signal N), 127 if it cannot be
    started, 2 for a usage or configuration error, 1 for a failure of the bridge.

    \b
    Example, as an editor's agent command:
      {"command": "acp-bridge", "args": ["run", "--", "claude-agent-acp"]}
    """
    try:
        config = resolve_config(ctx, config_file, agent, options)
        if config.telemetry.enabled:
            from acp_bridge.telemetry import require_sdk

            require_sdk()
    except ConfigError as exc:
        click.echo(f"acp-bridge: {exc}", err=True)
        ctx.exit(EXIT_USAGE)
    try:
        setup_logging(config)
    except (OSError, ValueError) as exc:
        where = spelling(ctx, "log_file") if given(ctx, "log_file") else f"{config.source}: bridge.log_file"
        click.echo(f"acp-bridge: {where}: cannot open {config.log_file}: {_reason(exc)}", err=True)
        ctx.exit(EXIT_USAGE)
    ctx.exit(run_and_report(config))


# Where a run option's value came from, highest first (spec/interface.md: the command line,
# then ACP_BRIDGE_* variables, then the file, then the default).
COMMAND_LINE, ENVIRONMENT = 2, 1
LAYERS = {"COMMANDLINE": COMMAND_LINE, "ENVIRONMENT": ENVIRONMENT}


def layer(ctx: click.Context, name: str) -> int:
    """2: given on the command line, 1: in the environment, 0: not given (file or default)."""
    source = ctx.get_parameter_source(name)
    return LAYERS.get(source.name, 0) if source is not None else 0


def given(ctx: click.Context, name: str) -> bool:
    return layer(ctx, name) > 0


def spelling(ctx: click.Context, name: str) -> str:
    """How the user wrote an option: `--system-prompt`, or `ACP_BRIDGE_SYSTEM_PROMPT`."""
    param = next(p for p in ctx.command.params if p.name == name)
    if layer(ctx, name) == 1 and isinstance(param, click.Option) and isinstance(param.envvar, str):
        return param.envvar
    return max(param.opts, key=len)


def resolve_config(ctx: click.Context, config_file: str | None, agent: tuple[str, ...],
                   options: dict[str, Any]) -> Config:
    """Merge defaults, the file, the environment and the command line into one Config.

    A higher layer's value replaces a lower one's, and for the system prompt that holds for
    the pair: text from one layer replaces a file from a lower one and the other way round.
    Only two spellings in the same layer conflict (`--system-prompt` with
    `--system-prompt-file`, `ACP_BRIDGE_SYSTEM_PROMPT` with `ACP_BRIDGE_SYSTEM_PROMPT_FILE`,
    `text` with `file` in the file, `-v` with `-q`). `settle` runs once, on the merged result.
    """
    file = Config()
    if config_file is not None:  # the file's reader and schema only with a file: start-up
        from acp_bridge.config.file import read_config

        file = read_config(config_file)
    agent_command, verbosity = _agent_command(agent), _verbosity(options)
    only_on_the_command_line = Overrides({"agent.command": agent_command, "verbosity": verbosity})
    command_line = only_on_the_command_line.over(layer_overrides(ctx, options, COMMAND_LINE))
    environment = layer_overrides(ctx, options, ENVIRONMENT)
    config = settle(apply_overrides(file, command_line.over(environment)))
    if not config.agent.command:
        raise ConfigError("no agent command: put it after `--` (acp-bridge run -- AGENT) or set [agent] "
                          "command; to see the bridge at work with its bundled agent, run `acp-bridge demo`")
    return config


def _agent_command(agent: tuple[str, ...]) -> tuple[str, ...] | None:
    """The agent command after `--`, or None for none (then [agent] command is used)."""
    if not agent:
        return None
    problem = command_problem(agent)
    if problem:
        raise ConfigError(f"the agent command after `--`: {problem}")
    return tuple(agent)


def _verbosity(options: dict[str, Any]) -> int | None:
    """-q: -1, -v: 1, -vv: 2 (the command line only), or None for neither."""
    if options.get("quiet") and options.get("verbose"):
        raise ConfigError("-v/--verbose and -q/--quiet: give only one")
    if options.get("quiet"):
        return -1
    return int(options["verbose"]) if options.get("verbose") else None


def layer_overrides(ctx: click.Context, options: dict[str, Any], which: int) -> Overrides:
    """What the run options given in layer `which` (COMMAND_LINE or ENVIRONMENT) say.

    click shows one value per option, from the highest layer that gives it, so a value
    given in both layers appears only in the higher one, which is where it takes effect.
    """
    def pick(name: str) -> Any:
        return options[name] if layer(ctx, name) == which else None

    text, prompt_file = pick("system_prompt"), pick("system_prompt_file")
    if text is not None and prompt_file is not None:
        raise ConfigError(f"{spelling(ctx, 'system_prompt')} and {spelling(ctx, 'system_prompt_file')}: "
                          "give only one")
    prompt: PromptText | PromptFile | None = None
    if text is not None:
        prompt = PromptText(text, spelling(ctx, "system_prompt"))
    elif prompt_file is not None:
        prompt = PromptFile(Path(prompt_file), spelling(ctx, "system_prompt_file"))
    capture = pick("capture")
    if capture is not None:
        from acp_bridge.config.file import check_capture_template

        label = spelling(ctx, "capture")
        check_capture_template(capture, lambda problem: ConfigError(f"{label}: {problem}"))

    # Flags: the command line can only say yes; ACP_BRIDGE_STRICT=0 (false, no, off) says no,
    # and that replaces what the file says too.
    def flag(name: str) -> bool | None:
        value = pick(name)
        return None if value is None else bool(value)

    def off_flag(name: str) -> bool | None:  # --no-health: health.enabled = false
        value = flag(name)
        return None if value is None else not value

    return Overrides({
        "capture.path": capture,
        "system_prompt.text": prompt,
        "system_prompt.mode": pick("system_prompt_mode"),
        "suggestions.enabled": off_flag("no_suggestions"),
        "suggestions.unlock_legacy_agent": flag("unlock_legacy_agent"),
        "health.enabled": off_flag("no_health"),
        "strict": flag("strict"),
        "log_file": pick("log_file"),
        "telemetry.enabled": flag("otlp"),
        "telemetry.content": flag("otlp_content"),
    })


def _reason(exc: BaseException) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


def run_and_report(config: Config) -> int:
    """Run the bridge; map what happened to an exit status."""
    # trio and the bridge are imported only here: the other commands do not need them. The
    # imports build thousands of objects that live as long as the process; collecting while
    # they pile up cost about 10 ms of start-up, and frozen, no later collection visits them.
    gc.disable()
    try:
        import trio

        from acp_bridge.shell.run import run_bridge
    finally:
        gc.freeze()
        gc.enable()

    status = EXIT_BRIDGE
    try:
        status = trio.run(run_bridge, config)
    except* ConfigError as group:
        for exc in _leaves(group):
            click.echo(f"acp-bridge: {exc}", err=True)
        status = EXIT_USAGE
    except* BridgeError as group:
        for exc in _leaves(group):
            click.echo(f"acp-bridge: {exc}", err=True)
        status = EXIT_BRIDGE
    except* KeyboardInterrupt:
        status = 128 + 2
    except* Exception as group:
        # A bug: with --strict a failing rule ends up here on purpose.
        for exc in _leaves(group):
            log.debug("internal error", exc_info=exc)
            click.echo(f"acp-bridge: internal error: {type(exc).__name__}: {exc}", err=True)
        status = EXIT_BRIDGE
    return status


def _leaves(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out


@main.command("check-config")
@click.argument("file", type=click.Path(dir_okay=False))
def check_config(file: str) -> None:
    """Validate a config FILE and print the effective settings as JSON.

    Exits 0 for a valid file and 2 for an invalid one (the error names the key). The values
    are the effective ones ([bridge] strict shows as system_prompt.strict too); secrets are
    masked: agent.env values print as "<redacted>" and the system prompt text as its length.
    """
    try:
        config = load_config(file)
    except ConfigError as exc:
        click.echo(f"acp-bridge: {exc}", err=True)
        raise SystemExit(EXIT_USAGE) from None
    import json

    click.echo(json.dumps(config.printable(), indent=2))


@main.command()
@click.option("--dir", "workdir", type=click.Path(file_okay=False), default=None,
              help="Keep the capture and the agent's log in this folder (default: a new temporary folder).")
@click.option("--color/--no-color", default=None, help="Colour the narration (default: when stdout is a terminal).")
def demo(workdir: str | None, color: bool | None) -> None:
    """Show the bridge at work, with nothing else installed.

    A scripted client that advertises the new prompt-suggestions capability talks to a
    bundled legacy agent (legacy suggestion channel only, no systemPrompt capability)
    through a real `acp-bridge run`. You see the legacy suggestion arrive, the standard
    update the client receives instead, the withdrawal on the next prompt, the system
    prompt injected, and where the capture was written.
    """
    from acp_bridge.commands.demo import main as run_demo

    raise SystemExit(run_demo(workdir, color))


if __name__ == "__main__":  # pragma: no cover
    main()
