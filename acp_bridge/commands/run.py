"""`acp-bridge run -- AGENT`: the agent behind the bridge, this process's stdio relayed to it.

Owns: the run options (the built-in rules' made from their declarations, `built_ins()`), the
precedence command line > ACP_BRIDGE_* environment > config file > defaults (`resolve_config`,
which `replay --rules` uses too), logging setup, and mapping outcomes to exit statuses. Must
never: print anything but protocol bytes to stdout while relaying (messages go to stderr or
--log-file), or import trio before the options are settled.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from acp_bridge.commands import EXIT_BRIDGE, EXIT_USAGE, collector_paused, prints_to_stderr
from acp_bridge.commands.paths import UserPath
from acp_bridge.config import Config, command_problem
from acp_bridge.config.layers import Overrides, PromptFile, PromptText, apply_overrides, effective
from acp_bridge.core.rewrites import built_ins
from acp_bridge.core.rewrites.options import CHOICE, FILE, TEXT, Option
from acp_bridge.errors import BridgeError, ConfigError
from acp_bridge.shell.logs import setup_logging

if TYPE_CHECKING:
    from acp_bridge.core.rewrites import Rule

log = logging.getLogger("acp_bridge")


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


@click.command(context_settings={"ignore_unknown_options": False}, epilog=RUN_EPILOG,
               short_help="Run AGENT behind the bridge, relaying stdio to it.")
@click.option("-c", "--config", "config_file", type=UserPath(dir_okay=False), envvar="ACP_BRIDGE_CONFIG",
              cls=RunOption, help="TOML config file (see configs/ for ready-made ones).")
@click.option("--capture", type=UserPath(), metavar="PATH", envvar="ACP_BRIDGE_CAPTURE", cls=RunOption,
              help="Write the traffic as JSONL to PATH; {time} and {pid} are filled in. [config: capture.path]")
@click.option("--no-health", is_flag=True, default=None, envvar="ACP_BRIDGE_NO_HEALTH", cls=RunOption,
              help="Turn off the protocol watchdog (findings in the log and the capture; see "
                   "docs/health.md). [config: health.enabled = false]")
@click.option("--strict", is_flag=True, default=None, envvar="ACP_BRIDGE_STRICT", cls=RunOption,
              help="Every strictness at once (tests, conformance runs): a rule that fails stops the "
                   "bridge, and implies system_prompt.strict (no silent downgrade of override to "
                   "append). Same as [bridge] strict; ACP_BRIDGE_STRICT=0 turns it off. [config: bridge.strict = true]")
@click.option("--log-file", type=UserPath(dir_okay=False), envvar="ACP_BRIDGE_LOG_FILE", cls=RunOption,
              help="Write the bridge's log to FILE instead of stderr. [config: bridge.log_file]")
@click.option("--otlp", is_flag=True, default=None, envvar="ACP_BRIDGE_OTLP", cls=RunOption,
              help="Send traces and metrics of the traffic to an OpenTelemetry collector (OTLP; the "
                   "OTEL_* variables say where). Needs the otel extra. See docs/telemetry.md. "
                   "[config: telemetry.enabled = true]")
@click.option("--otlp-content", is_flag=True, default=None, envvar="ACP_BRIDGE_OTLP_CONTENT", cls=RunOption,
              help="With --otlp, also send prompt text, replies and tool input and output (the capture's "
                   "redaction applied first); implies --otlp. [config: telemetry.content = true]")
@click.option("--rule", "rule_files", multiple=True, metavar="FILE.py", type=UserPath(dir_okay=False),
              help="Run the rules FILE.py defines (`rules = [...]`) after the configured ones; repeatable, "
                   "after [rules] files. See docs/rules.md. [config: rules.files]")
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

    With no agent, it is a proxy in an ACP chain: a conductor starts it and
    gives it its successor (`proxy/initialize`, or the older `_meta.proxy`);
    see docs/proxy-chains.md. Exit status 2 if what started it is no conductor.
    """
    with prints_to_stderr():  # stdout is the client's protocol stream, from here to the end
        _run(ctx, config_file, agent, options)


# Where `run --help` lists the bridge's own options among the built-in rules' (`BuiltIn.rank`:
# the built-ins' options come in their ranks, 10 to 50, then those of a built-in that gives
# none, at `DEFAULT_RANK`, before --strict and the options after it).
OWN_RANKS = {"config_file": 0, "capture": 1, "no_health": 25}
OWN_LAST_RANK = 90  # --strict and the options after it


def rule_options() -> list[Option]:
    """The built-in rules' options, in the order `run --help` lists them."""
    declared = sorted(built_ins(), key=lambda built_in: built_in.rank)
    return [option for built_in in declared for option in built_in.options]


def click_option(option: Option) -> click.Option:
    """A built-in rule's option as `run` takes it (a flag says only yes: None when not given)."""
    kwargs: dict[str, Any] = {"envvar": option.envvar, "help": option.full_help()}
    if option.is_flag:
        kwargs.update(is_flag=True, default=None)
    elif option.kind == CHOICE:
        kwargs["type"] = click.Choice(option.choices)
    else:
        kwargs["metavar"] = option.metavar
        if option.kind == FILE:
            kwargs["type"] = UserPath()  # checked where it is read: a replaced one never is
    return RunOption([option.flag, option.name], **kwargs)


def _rank(param: click.Parameter) -> int:
    if not isinstance(param, click.Option):
        return OWN_LAST_RANK + 1  # the agent, after every option
    return OWN_RANKS.get(param.name or "", OWN_LAST_RANK)


def _with_rule_options(params: list[click.Parameter]) -> list[click.Parameter]:
    ranked = [(_rank(param), param) for param in params]
    for built_in in built_ins():
        ranked.extend((built_in.rank, click_option(option)) for option in built_in.options)
    return [param for _, param in sorted(ranked, key=lambda pair: pair[0])]


run.params[:] = _with_rule_options(run.params)


def _run(ctx: click.Context, config_file: str | None, agent: tuple[str, ...], options: dict[str, Any]) -> None:
    try:
        # No agent: a conductor's component, unless a person started it at a terminal.
        config = resolve_config(ctx, config_file, agent, options, agent_required=_stdin_is_a_terminal())
        if config.telemetry.enabled:
            from acp_bridge.telemetry import require_sdk

            require_sdk()
        rules = load_rules(config)  # user code runs here: before the agent starts
    except ConfigError as exc:
        click.echo(f"acp-bridge: {exc}", err=True)
        ctx.exit(EXIT_USAGE)
    try:
        setup_logging(config)
    except (OSError, ValueError) as exc:
        where = spelling(ctx, "log_file") if given(ctx, "log_file") else f"{config.source}: bridge.log_file"
        click.echo(f"acp-bridge: {where}: cannot open {config.log_file}: {_reason(exc)}", err=True)
        ctx.exit(EXIT_USAGE)
    ctx.exit(run_and_report(config, rules))


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


def _stdin_is_a_terminal() -> bool:
    try:
        return os.isatty(0)
    except OSError:
        return False


def resolve_config(ctx: click.Context, config_file: str | None, agent: tuple[str, ...],
                   options: dict[str, Any], *, agent_required: bool = True) -> Config:
    """Merge defaults, the file, the environment and the command line into one Config.

    A higher layer's value replaces a lower one's, and for the system prompt that holds for
    the pair: text from one layer replaces a file from a lower one and the other way round.
    Only two spellings in the same layer conflict (`--system-prompt` with
    `--system-prompt-file`, `ACP_BRIDGE_SYSTEM_PROMPT` with `ACP_BRIDGE_SYSTEM_PROMPT_FILE`,
    `text` with `file` in the file, `-v` with `-q`). `effective` runs once, on the merged result.
    Without `agent_required`, no agent command is a proxy chain's component (`run` under a
    conductor).
    """
    file = Config()
    if config_file is not None:  # the file's reader and schema only with a file: start-up
        from acp_bridge.config.file import read_config

        file = read_config(config_file)
    agent_command, verbosity = _agent_command(agent), _verbosity(options)
    only_on_the_command_line = Overrides({"agent.command": agent_command, "verbosity": verbosity})
    command_line = only_on_the_command_line.over(layer_overrides(ctx, options, COMMAND_LINE))
    environment = layer_overrides(ctx, options, ENVIRONMENT)
    config = effective(apply_overrides(file, command_line.over(environment)))
    if not config.agent.command and agent_required:
        raise ConfigError("no agent command: put it after `--` (acp-bridge run -- AGENT) or set [agent] "
                          "command; to see the bridge at work with its bundled agent, run `acp-bridge demo`; "
                          "as a proxy in an ACP chain, a conductor starts it without one (docs/proxy-chains.md)")
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

    settings: dict[str, Any] = {}
    for built_in in built_ins():
        _rule_settings(ctx, built_in.options, pick, settings)
    capture = pick("capture")
    if capture is not None:
        from acp_bridge.config.paths import check_capture_target, check_capture_template

        label = spelling(ctx, "capture")
        check_capture_template(capture, lambda problem: ConfigError(f"{label}: {problem}"))
        check_capture_target(capture, lambda problem: ConfigError(f"{label}: {problem}"))

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
        **settings,
        "health.enabled": off_flag("no_health"),
        "strict": flag("strict"),
        "log_file": pick("log_file"),
        "telemetry.enabled": flag("otlp"),
        "telemetry.content": flag("otlp_content"),
        "rules.command_line": tuple(options["rule_files"]) if pick("rule_files") else None,
    })


def _rule_settings(ctx: click.Context, options: tuple[Option, ...], pick: Any, settings: dict[str, Any]) -> None:
    """What one layer gives of a built-in rule's options, by config key, into `settings`. A
    rule's text and file options are one setting (its text's key): one spelling only."""
    text = next((option for option in options if option.kind == TEXT), None)
    file = next((option for option in options if option.kind == FILE), None)
    pair = (text, file) if text is not None and file is not None else ()
    if text is not None and file is not None:
        given_text, given_file = pick(text.name), pick(file.name)
        if given_text is not None and given_file is not None:
            raise ConfigError(f"{spelling(ctx, text.name)} and {spelling(ctx, file.name)}: give only one")
        if given_text is not None:
            settings[text.key] = PromptText(given_text, spelling(ctx, text.name))
        elif given_file is not None:
            settings[text.key] = PromptFile(Path(given_file), spelling(ctx, file.name))
    for option in options:
        if option in pair:
            continue
        value = pick(option.name)
        if value is not None:
            settings[option.key] = option.value(bool(value) if option.is_flag else value)


def _reason(exc: BaseException) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


def load_rules(config: Config) -> list[Rule]:
    """The rules `config` runs, in order (built-in, [[rewrite]], [rules], --rule). Raises ConfigError."""
    if not (config.rewrite or config.rules.files or config.rules.enable or config.rules.command_line):
        from acp_bridge.core.rewrites import build_rewrites  # the usual run: no loader to import

        return build_rewrites(config)
    from acp_bridge.config.rules import load_rules as load

    return [loaded.rule for loaded in load(config)]


def run_and_report(config: Config, rules: list[Rule] | None = None) -> int:
    """Run the bridge (with `rules`, the built-ins when None); map what happened to an exit status."""
    # trio and the bridge only here: `replay --rules` imports this module and runs without them.
    with collector_paused():
        import trio

        from acp_bridge.shell.run import run_bridge

    from acp_bridge.shell.logs import CLOSE_SECONDS, stderr_bounded

    status = EXIT_BRIDGE
    # Everything said on stderr goes through one bounded writer, and the exit waits for it
    # only so long: an editor that never reads stderr holds up neither the relay nor the exit.
    with stderr_bounded(CLOSE_SECONDS):
        try:
            status = trio.run(run_bridge, config, rules)
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
