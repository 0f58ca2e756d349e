"""`acp-bridge replay CAPTURE`: a capture served back as the agent, or (`--rules`) the rules
re-run over it offline.

Owns: the command's options (the run options are `run`'s own declarations, copied, and
settled by `run`'s config layering), reading the capture file, bad input as one line on
stderr with exit 2, and the exit statuses. Must never: write anything but protocol lines to
stdout while serving, or import trio when only `--rules` runs.
"""

from __future__ import annotations

import copy
import math
import os
import sys
from typing import TYPE_CHECKING, Any

import click
import orjson

from acp_bridge.commands import EXIT_BRIDGE, prints_to_stderr
from acp_bridge.commands.captures import fail, reading, say
from acp_bridge.commands.output_file import NotAFile, refuse_special, written_whole
from acp_bridge.commands.run import load_rules, resolve_config
from acp_bridge.commands.run import run as run_command
from acp_bridge.core.lines import MIB
from acp_bridge.errors import ConfigError
from acp_bridge.replay.script import Script, build_script
from acp_bridge.shell.logs import setup_logging

if TYPE_CHECKING:
    from acp_bridge.replay.server import ReplayOptions

# The run options `--rules` takes, as `run` declares them: all but where a live session's
# capture goes (`--write` says where the re-run goes) and `--strict` (declared here, for both
# modes). The parameter name `capture` stays unused here: `resolve_config` reads it.
_NOT_TAKEN = ("capture", "strict")
# How long the last reports may wait for a stderr that is not drained, at the end.
STDERR_LINGER = 0.5
# `resolve_config` wants an agent command, as `run` does; the re-run starts none.
_NO_AGENT = ("acp-bridge-replay",)

REPLAY_EPILOG = """
Redacted values replay as the capture holds them: a value the capture masked reaches the client
as the string "<redacted>" (and the system prompt as "<redacted: system prompt>"), and a line
withheld whole is not replayed (a withheld answer becomes a JSON-RPC error). See docs/replay.md.

\b
In an editor's agent settings:
  {"command": "acp-bridge", "args": ["replay", "/path/to/cap.jsonl"]}
Through today's rules:
  acp-bridge run [RUN OPTIONS] -- acp-bridge replay --before-rules cap.jsonl
In CI (exit 1 when the rules' output differs):
  acp-bridge replay cap.jsonl --rules [RUN OPTIONS]
"""


@click.command("replay", epilog=REPLAY_EPILOG,
               short_help="Serve a capture as the agent it recorded, or re-run the rules.")
@click.argument("capture_file", metavar="CAPTURE", type=click.Path(dir_okay=False))
@click.option("--before-rules", is_flag=True,
              help="Replay what the agent sent (the capture's raw lines) instead of what the client "
                   "received, to run it through the bridge again: acp-bridge run [OPTIONS] -- "
                   "acp-bridge replay --before-rules CAPTURE.")
@click.option("--timing", type=click.Choice(["fast", "recorded"]), default="fast", show_default=True,
              help="fast: as fast as causality allows; recorded: keep the recorded gaps (capped by --max-gap).")
@click.option("--max-gap", type=click.FloatRange(min=0, max=3600), default=2.0, show_default=True, metavar="S",
              callback=lambda ctx, param, value: _a_number(value),
              help="With --timing recorded, the longest pause kept, in seconds.")
@click.option("--strict", is_flag=True, default=None,
              help="Serving: end the replay with exit status 1 at the first divergence: a request the "
                   "recording has no counterpart for, or an agent request the client did not answer "
                   "(for CI). With --rules: the run option (a failing rule stops, exit 1, no summary).")
@click.option("--rules", is_flag=True,
              help="Do not serve: feed the recorded incoming lines through the rules that the RUN OPTIONS "
                   "and config set, and compare what would go out now with what was recorded going out. "
                   "One line per message that differs, then a summary; exit 1 when something differs.")
@click.option("--json", "as_json", is_flag=True, help="With --rules: the differences and summary as one JSON object.")
@click.option("--write", metavar="OUT.jsonl", type=click.Path(),
              help="With --rules: write the re-run as a capture (show, stats and export read it).")
@click.pass_context
def replay(ctx: click.Context, /, capture_file: str, before_rules: bool, timing: str, max_gap: float,
           strict: bool | None, rules: bool, as_json: bool, write: str | None, config_file: str | None,
           **options: Any) -> None:
    """Serve CAPTURE on stdin/stdout as the agent it recorded, or re-run the rules over it.

    Serving (the default), each request of the live client is matched to the next recorded
    client request of the same method and session and gets the recorded answer (with the live
    id, as the client wrote it), preceded by what the agent sent in between; the agent's own
    requests (permission, fs, terminal) are sent and the client's answer awaited (a different
    answer is reported on stderr; another request sent instead of the answer ends the wait, as
    a divergence). A request with no recorded counterpart, and a line that is not a request
    (a batch, garbage, a bad method or id), gets a JSON-RPC error; each kind is reported once
    on stderr and the replay stays up: it never hangs. By default the client gets what the
    editor got (the bridge's rewrites and own messages included). Exit status: 0, or 1 with
    --strict at the first divergence, 2 for bad input, 130 on SIGINT.

    Bad input (not a regular file, not a capture, an unknown format version, a malformed
    line) is one line on stderr naming the file and line, exit status 2. A capture without
    its end record (a killed bridge) is replayed up to its last record; its torn last line,
    if any, is ignored and said on stderr.
    """
    serving_only = [name for name, given in (("--before-rules", before_rules),
                                             ("--timing", _given(ctx, "timing")),
                                             ("--max-gap", _given(ctx, "max_gap"))) if given]
    rules_only = [name for name, given in (("--json", as_json), ("--write", write is not None)) if given]
    rules_only += [_spelling(ctx, param) for param in ctx.command.params
                   if param.name in options or param.name == "config_file"
                   if param.name is not None and _given(ctx, param.name)]
    if _given(ctx, "max_gap") and timing != "recorded":
        raise click.UsageError("--max-gap: only with --timing recorded", ctx)
    if rules and serving_only:
        raise click.UsageError(f"{', '.join(serving_only)}: only when serving, not with --rules", ctx)
    if not rules and rules_only:
        raise click.UsageError(f"{', '.join(rules_only)}: only with --rules (to serve through today's "
                               "rules: acp-bridge run [OPTIONS] -- acp-bridge replay --before-rules CAPTURE)", ctx)
    if rules:
        if write is not None:
            try:
                refuse_special(write)  # before the capture is read
            except NotAFile as exc:
                fail(f"--write: {exc}")
        options["strict"] = strict
        ctx.exit(_rerun(ctx, capture_file, config_file, options, as_json, write))
    from acp_bridge.replay.server import ReplayOptions

    with reading(capture_file, strict=True) as capture:
        script = build_script(capture, before_rules=before_rules)
    say(capture)
    with prints_to_stderr():  # stdout is the protocol stream toward the client
        status = _serve(script, ReplayOptions(timing, max_gap, bool(strict)))
    ctx.exit(status)


def _a_number(value: float) -> float:
    if math.isnan(value):  # FloatRange lets NaN through: every comparison with it is false
        raise click.BadParameter("nan is not a number of seconds")
    return value


def _given(ctx: click.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def _spelling(ctx: click.Context, param: click.Parameter) -> str:
    return max(param.opts, key=len) if isinstance(param, click.Option) else str(param.name)


def _serve(script: Script, options: ReplayOptions) -> int:
    import trio

    from acp_bridge.replay.report import Reporter
    from acp_bridge.replay.server import ReplayServer
    from acp_bridge.shell.run import open_stdio

    report = Reporter(2)
    try:
        os.fstat(2)
    except OSError:  # started with stderr closed: fd 2 may later be a file the replay opens
        report.broken = True
    if script.withheld:
        report(f"{script.withheld} agent line(s) were withheld whole by the capture's redaction; not replayed")
    if script.partial:
        report(f"{script.partial} line(s) over the parse limit were recorded only in part; "
               "their first bytes are replayed")

    async def main() -> int:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(report.run)
            async with open_stdio() as stream:
                server = ReplayServer(script, options, stream, report)
                status = await server.run()
            await report.close(STDERR_LINGER, last=server.summary())
            nursery.cancel_scope.cancel()
        return status

    status = EXIT_BRIDGE
    try:
        status = trio.run(main)
    except* KeyboardInterrupt:
        status = 128 + 2
    return status


def _rerun(ctx: click.Context, capture: str, config_file: str | None, options: dict[str, Any],
           as_json: bool, write: str | None) -> int:
    from acp_bridge.core.rewrites import stray_output
    from acp_bridge.replay.rerun import RuleFailed, rerun

    with prints_to_stderr():  # the rules' own prints: stdout is the differences (or JSON), after
        try:
            config = resolve_config(ctx, config_file, _NO_AGENT, options)
            rules = load_rules(config)
            setup_logging(config)
        except ConfigError as exc:
            fail(str(exc))
        except (OSError, ValueError) as exc:
            fail(f"cannot open the log file: {exc}")
        try:
            with reading(capture, strict=True) as recorded:
                result = rerun(recorded, config, rules, strict=config.strict,
                               max_line=config.relay.parse_limit_mib * MIB, redact=config.capture.redact,
                               write=write is not None, argv=sys.argv, pid=os.getpid(),
                               config_digest=config.digest(), divert_stray=stray_output.DECLARED.is_on(config))
            say(recorded)
        except RuleFailed as exc:
            click.echo(f"acp-bridge: {capture}: {exc}", err=True)
            return EXIT_BRIDGE
    if as_json:
        click.echo(orjson.dumps(result.as_json(), option=orjson.OPT_NON_STR_KEYS).decode())
    else:
        for difference in result.differences:
            click.echo(difference.text())
        click.echo(f"acp-bridge replay --rules: {capture}: {result.summary()}")
    for failure in result.failures.values():  # each line went on as it came: no difference, still a failure
        click.echo(f"acp-bridge replay --rules: {capture}: {failure.text()}", err=True)
    if write is not None and result.capture is not None:
        try:
            # A capture may hold what redaction leaves: private, as `run` makes it.
            with written_whole(write, 0o600) as file:
                file.write(result.capture)
        except NotAFile as exc:
            fail(f"--write: {exc}")
        except OSError as exc:
            fail(f"{write}: cannot write it: {exc.strerror or exc}")
    return 1 if result.differences or result.failures else 0


# The run options, as `run` declares them (copies: click keeps state on a parameter).
replay.params.extend(copy.copy(param) for param in run_command.params
                     if isinstance(param, click.Option) and param.name not in _NOT_TAKEN)
