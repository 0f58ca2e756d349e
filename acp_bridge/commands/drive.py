"""`acp-bridge drive CAPTURE -- AGENT`: the client side of a capture, against a live agent.

Owns: the options; reading the recording through the one reader (strictly: bad input is
exit 2); running the agent behind the bridge's relay with the driver as its client
(shell/inprocess.py, replay/driver.py), recorded by the bridge's capture (to `--capture OUT`,
else to a private temporary file); comparing that capture with the recording
(replay/drive_report.py, on `diff`'s engine); the outputs (text, `--json`, `--junit`) and the
exit status: 0 as recorded, 1 a difference or a failed turn, 2 bad input or an agent that
cannot start. Must never: write to the recording.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

from acp_bridge.commands import prints_to_stderr
from acp_bridge.commands.captures import CAPTURE, dumps_json, fail, reading, say
from acp_bridge.config import Config, command_problem
from acp_bridge.config.model import AgentConfig, CaptureConfig, HealthConfig
from acp_bridge.core.printable import printable
from acp_bridge.errors import BridgeError

if TYPE_CHECKING:
    from acp_bridge.replay.client_side import ClientSide
    from acp_bridge.replay.drive_report import DriveReport, DriveResult
    from acp_bridge.replay.turns import Track

EXIT_DIFFERS = 1
TURN_TIMEOUT = 300.0  # seconds a turn may take without --timeout: a drive in CI never waits forever


def _say(text: str) -> None:
    click.echo(f"acp-bridge: drive: {printable(text, quote_backslash=False)}", err=True)


def _a_number(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is not None and math.isnan(value):  # FloatRange lets NaN through: every comparison with it is false
        raise click.BadParameter("nan is not a number of seconds")
    return value


def _a_template(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """`--capture OUT` checked as `run --capture` checks it, before the agent starts: a bad
    placeholder would otherwise be a traceback once the agent runs."""
    if value is not None:
        from acp_bridge.config.paths import check_capture_target, check_capture_template

        check_capture_template(value, click.BadParameter)
        check_capture_target(value, click.BadParameter)
    return value


@click.command(short_help="Play a capture's client side to AGENT and compare.")
@click.argument("capture", type=CAPTURE)
@click.argument("agent", nargs=-1, type=click.UNPROCESSED, metavar="-- AGENT [ARG...]")
@click.option("--cwd", type=click.Path(exists=True, file_okay=False), metavar="DIR",
              help="The folder the agent works in: it replaces the recorded `cwd` in what is sent, and the "
                   "agent is started there.")
@click.option("--capture", "out", metavar="OUT", callback=_a_template,
              help="Record the new session to OUT, as `run --capture` does ({time} and {pid} are filled in).")
@click.option("--timeout", type=click.FloatRange(min=0), metavar="S", callback=_a_number,
              help=f"The longest a turn (or any request) may take; past it the turn is reported as failed and "
                   f"the agent is stopped. [default: {TURN_TIMEOUT:g}; 0: no limit]")
@click.option("--compare", type=click.Choice(["structure", "text", "none"]), default="structure", show_default=True,
              help="What to compare with the recording: update kinds, tool calls, permission requests, stop "
                   "reasons and errors (structure); the same and the messages' text (text); nothing (none).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of text.")
@click.option("--junit", metavar="FILE", type=click.Path(),
              help="Write a JUnit XML report: a test case per prompt turn.")
def drive(capture: str, agent: tuple[str, ...], cwd: str | None, out: str | None, timeout: float | None,
          compare: str, as_json: bool, junit: str | None) -> None:
    """Play the client side of CAPTURE to AGENT and compare what the agent does with the
    recording, turn by turn.

    Sends what the recorded client sent, as it sent it (before the bridge's rules): each
    request once the one before it is answered, each prompt once the turn before it has
    ended, cancels where they were. The agent's requests (permissions, files, terminals) get
    the recorded answers. Prints one line per difference, with the turn and the recorded seq.
    Exit status 0: as recorded; 1: it differs, or a turn failed; 2: bad input, or the agent
    cannot start.
    """
    from acp_bridge.replay.drive_report import drive_result

    cwd = _checked_inputs(agent, cwd, junit)
    timeout = TURN_TIMEOUT if timeout is None else timeout or None  # 0: no limit
    side = _recorded_client(capture)
    live, report, recorded_to = _drive_the_agent(side, agent, cwd, out, timeout, compare)
    result = drive_result(side, live, report, compare)
    if as_json:
        click.echo(dumps_json({"capture": capture, "agent": list(agent), "recorded_to": out and recorded_to,
                               **result.as_json()}))
    else:
        for line in result.lines():
            click.echo(line)
    if junit is not None:
        _write_junit(junit, result, Path(capture).name)
    raise SystemExit(0 if result.ok else EXIT_DIFFERS)


def _checked_inputs(agent: tuple[str, ...], cwd: str | None, junit: str | None) -> str | None:
    """The agent command and the --junit path checked (a usage error if not fit); `cwd` made
    absolute, as ACP wants it."""
    from acp_bridge.commands.output_file import NotAFile, refuse_special

    if not agent:
        fail("no agent to drive: put its command after `--` (acp-bridge drive CAPTURE -- AGENT [ARG...])")
    if (problem := command_problem(agent)) is not None:
        fail(f"the agent command after -- {problem}")
    if cwd is not None:
        cwd = os.path.abspath(cwd)  # ACP's cwd is an absolute path
    if junit is not None:
        try:
            refuse_special(junit)
        except NotAFile as exc:
            fail(f"--junit: {exc}")
    return cwd


def _recorded_client(capture: str) -> ClientSide:
    """The client side of the capture, what it says on stderr said; an error if it sent nothing."""
    from acp_bridge.replay.client_side import ClientSide

    with reading(capture, strict=True) as reader:
        side = ClientSide.from_records(reader)
    say(reader)
    if not side.lines:
        fail(f"{capture}: the recorded client sent nothing to play")
    return side


def _drive_the_agent(side: ClientSide, agent: tuple[str, ...], cwd: str | None, out: str | None,
                     timeout: float | None, compare: str) -> tuple[list[Track], DriveReport, str | None]:
    """`side` played to the agent behind a bridge that records the live session (to `out`,
    or a scratch file): the live session's tracks (what `compare` looks at), the driver's
    report, and where the session was recorded. Exits 2 when the agent cannot start."""
    import trio

    from acp_bridge.replay.drive_report import DriveReport, live_tracks
    from acp_bridge.replay.driver import Driver
    from acp_bridge.shell.inprocess import with_agent
    from acp_bridge.shell.logs import setup_logging

    with tempfile.TemporaryDirectory(prefix="acp-drive-") as scratch:
        path = out if out is not None else os.path.join(scratch, "live.jsonl")
        config = Config(agent=AgentConfig(command=agent, cwd=cwd),
                        capture=CaptureConfig(path=path, required=True), health=HealthConfig(enabled=False))
        setup_logging(config)
        report = DriveReport()

        async def client(stream: trio.abc.HalfCloseableStream) -> bool:
            nonlocal report
            report = await Driver(side, stream, cwd=cwd, timeout=timeout, say=_say).run()
            return report.stopped is not None

        try:
            with prints_to_stderr():  # stdout is the report (or its JSON), written after
                run = trio.run(with_agent, config, client)
        except* BridgeError as group:  # the capture cannot be created, or written
            fail("; ".join(str(exc) for exc in group.exceptions))
        if run.cannot_start is not None:
            raise SystemExit(2)  # said on stderr by the bridge's log, with a hint
        if run.capture is None:
            fail("the live session could not be recorded", EXIT_DIFFERS)
        with reading(run.capture) as live_reader:
            live = live_tracks(live_reader, compare)
    return live, report, run.capture


def _write_junit(junit: str, result: DriveResult, name: str) -> None:
    """The result as JUnit XML in `junit`, written whole; an error if it cannot be."""
    from acp_bridge.commands.output_file import NotAFile, written_whole

    try:
        with written_whole(junit) as file:
            file.write(result.junit_xml(name).encode("utf-8"))
    except (NotAFile, OSError) as exc:
        fail(f"--junit: cannot write {junit}: {getattr(exc, 'strerror', None) or exc}")
