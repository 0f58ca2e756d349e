"""The command line: `acp-bridge run | check-config | show | stats | export | check | replay | diff |
drive | demo | ui | mcp | setup | doctor`.

Owns: the command group, the short form `acp-bridge [RUN OPTIONS] -- AGENT`, usage errors
as one line, and loading each command's module only when that command is asked for: `run`
is what editors start, often, so it pays for nothing another command needs. Every click
command lives in this package, one module each. Must never: import a command's module
before it is asked for.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, redirect_stdout
from typing import Any

import click

from acp_bridge import __version__

EXIT_USAGE = 2
EXIT_BRIDGE = 1

# Each command's name, and the module of this package that defines it under the module's name.
COMMANDS = {
    "run": "run",
    "check-config": "check_config",
    "show": "show",
    "stats": "stats",
    "export": "export",
    "check": "check",
    "replay": "replay",
    "diff": "diff",
    "drive": "drive",
    "rules": "rules",
    "demo": "demo",
    "ui": "ui",
    "mcp": "mcp",
    "setup": "setup",
    "doctor": "doctor",
}


@contextmanager
def collector_paused() -> Iterator[None]:
    """Around imports: they build thousands of objects that live as long as the process, and
    collecting while they pile up cost `run` about 10 ms of start-up; frozen afterwards, no
    later collection visits them."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def prints_to_stderr() -> AbstractContextManager[Any]:
    """While it lasts, what Python code prints (a rule file as it loads, a rule's hook) goes
    to stderr: stdout is the protocol stream (`run`, the served replay) or the command's
    own output (`replay --rules --json`, `drive --json`, `rules`). The bridge writes its
    protocol to fd 1 through its own stream, never through `sys.stdout`, so this costs
    nothing and misses nothing printed in Python; a command's own output is written after."""
    return redirect_stdout(sys.stderr)


def agent_line(words: list[str]) -> str:
    """`words` as one shell line to show in a message (quoted, control characters escaped)."""
    import shlex

    from acp_bridge.core.printable import printable

    return printable(shlex.join(words), quote_backslash=False)


class BridgeGroup(click.Group):
    """The command group, each command imported from its module when it is asked for."""

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
            message = exc.format_message()
            # an option neither `run` nor the group has, nor is close to: most likely the
            # agent's (the short form `acp-bridge [RUN OPTIONS] -- AGENT` included)
            if isinstance(exc, click.NoSuchOption) and not exc.possibilities and exc.ctx is not None \
                    and exc.ctx.command in (self, self.load("run")):
                start = args.index("run") + 1 if exc.ctx.command is not self else 0
                words = agent_line(self.agent_words(args[start:], exc.option_name))
                message += (" If it is the agent's, put the agent's command line after `--`: "
                            f"acp-bridge run [OPTIONS] -- {words}")
            click.echo(f"acp-bridge: {message} (see '{where} --help')", err=True)
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
        if not arg.startswith("-") or arg == "-":
            return False
        names = {name for param in self.load("run").params if isinstance(param, click.Option)
                 for name in (*param.opts, *param.secondary_opts)}
        return (arg.split("=", 1)[0] if arg.startswith("--") else arg[:2]) in names

    def agent_words(self, args: list[str], unknown: str) -> list[str]:
        """The agent's command line a user most likely meant in `run`'s `args`, where click
        found the option `unknown` that `run` does not have: from the first word that is not
        an option of `run` (nor an option's value), or else what follows `--`, with `unknown`
        added where it is not among them. `run my-agent --acp` gives `my-agent --acp`."""
        takes_value = {name for param in self.load("run").params if isinstance(param, click.Option)
                       and not param.is_flag and not param.count for name in param.opts}
        words: list[str] = []
        for at, arg in enumerate(args):
            if arg == "--":
                words = args[at + 1:]
                break
            if (arg == "-" or not arg.startswith("-")) and (at == 0 or args[at - 1] not in takes_value):
                words = [word for word in args[at:] if word != "--"]
                break
        if unknown not in words:
            words = [*words, unknown]
        return words if words[0] != unknown else ["AGENT", *words]

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                            list[str]]:
        """As click's, but an unknown command gets the commands it is close to (`stat`: did you
        mean `stats`?), or else the line that runs it as the agent."""
        name = args[0]
        if name not in COMMANDS and not name.startswith("-") and not ctx.resilient_parsing:
            import difflib

            close = difflib.get_close_matches(name, COMMANDS, n=3, cutoff=0.6)
            if close:
                ctx.fail(f"No such command {name!r}. Did you mean {' or '.join(repr(c) for c in close)}?")
            ctx.fail(f"No such command {name!r}. To run it as the agent: "
                     f"acp-bridge -- {agent_line(args)}")
        return super().resolve_command(ctx, args)

    def load(self, name: str) -> click.Command:
        """The command `name` (one of COMMANDS), its module imported the first time."""
        if name not in self.commands:
            module = COMMANDS[name]
            with collector_paused():  # `__import__`: `-X importtime` does not see importlib's
                imported = __import__(f"{__name__}.{module}", fromlist=[module])
            self.add_command(getattr(imported, module), name)
        return self.commands[name]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As click's, but a command's summary is never cut mid-sentence: its `short_help`, or
        else the whole first sentence of its help, wrapped."""
        rows = [(name, command.get_short_help_str(limit=sys.maxsize)) for name in self.list_commands(ctx)
                if (command := self.get_command(ctx, name)) is not None and not command.hidden]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self.load(cmd_name) if cmd_name in COMMANDS else None


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
