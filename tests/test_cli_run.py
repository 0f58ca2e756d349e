"""`acp-bridge run` end to end: a real bridge process in front of a real agent process."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import click
import orjson
import pytest
from click.testing import CliRunner

from acp_bridge.commands.cli import main
from tests.conftest import agent_cmd, example, keeper, line, run_cli, signal_running_bridge

MIXED = b"".join([
    b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n',
    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"caf\\u00e9"}}}}\r\n',
    b"\n",
    b"not json at all \xff\xfe\n",
    b'[{"jsonrpc":"2.0","id":9,"method":"batch/a"}]\n',
    b'{"jsonrpc":"2.0","method":"_acme/ext","params":{"_meta":{"x":1e3}}}\n',
    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"session_info_update","_meta":{"promptSuggestions":{"suggestions":[{"text":"hi"}]}}}}}\n',
    b'{ "jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1} }\n',
    b'{"jsonrpc":"2.0","id":"0","result":null}\n',
    b'{"partial last line',
])


SUGGESTION = next(line for line in MIXED.split(b"\n") if b"promptSuggestions" in line) + b"\n"


@pytest.mark.parametrize(("options", "stream"), [
    pytest.param(["--no-suggestions"], MIXED, id="every-feature-off"),
    pytest.param([], MIXED.replace(SUGGESTION, b""), id="defaults-no-rule-applies"),
])
async def test_mixed_stream_comes_back_byte_exact_through_an_echo_agent(options: list[str], stream: bytes) -> None:
    """Every line, valid or not, is relayed as it came: the agent echoes, the client gets it.

    (With the defaults, the legacy suggestion would be withheld from this client, which did
    not advertise suggestions: that is a rule applying, tested in test_suggestions_cli.py.)
    The batch's request was never answered (the echo agent sends it back as a request), so
    when the agent exits the bridge answers it, on a line of its own after the torn last one.
    """
    result = await run_cli(["run", *options, "--", *agent_cmd("echo")], stream)
    assert result.returncode == 0, result.stderr
    answer = (b'{"jsonrpc":"2.0","id":9,"error":{"code":-32603,"message":"agent exited with status 0 '
              b'before answering","data":{"exitStatus":0}}}\n')
    assert result.stdout == stream + b"\n" + answer


async def test_an_8_mib_line_is_relayed_whole() -> None:
    big = b'{"jsonrpc":"2.0","method":"_big","params":"' + b"a" * (8 * 1024 * 1024) + b'"}\n'
    result = await run_cli(["run", "--", *agent_cmd("echo")], big + b"{}\n")
    assert result.returncode == 0
    assert result.stdout == big + b"{}\n"


async def test_a_line_over_the_parse_limit_is_relayed_whole(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[relay]\nparse_limit_mib = 1\n")
    big = b'{"jsonrpc":"2.0","id":1,"method":"x","params":"' + b"b" * (3 * 1024 * 1024) + b'"}\n'
    result = await run_cli(["run", "-c", str(config), "--", *agent_cmd("echo")], big)
    # Streamed through unparsed, yet known by its id: the echo agent never answers it, so
    # the bridge does when the agent exits.
    answer = (b'{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"agent exited with status 0 '
              b'before answering","data":{"exitStatus":0}}}\n')
    assert result.stdout == big + answer


async def test_agent_stderr_reaches_the_bridge_stderr_and_stdout_stays_protocol_only() -> None:
    result = await run_cli(["run", "--", *agent_cmd("stderr", "agent says hello")], b'{"a":1}\n')
    assert b"agent says hello\n" in result.stderr
    assert result.stdout == b'{"a":1}\n'


@pytest.mark.parametrize("code", [0, 1, 3, 42])
async def test_the_agent_exit_status_is_the_bridge_exit_status(code: int) -> None:
    result = await run_cli(["run", "--", *agent_cmd("echo", "--exit", str(code))])
    assert result.returncode == code


async def test_death_by_signal_gives_128_plus_n() -> None:
    result = await run_cli(["run", "--", *agent_cmd("signal", str(int(signal.SIGKILL)))])
    assert result.returncode == 128 + signal.SIGKILL


async def test_python_dash_m_and_the_agent_command_from_the_config(tmp_path: Path) -> None:
    config = tmp_path / "bridge.toml"
    command = orjson.dumps(agent_cmd("echo")).decode()
    config.write_text(f"[agent]\ncommand = {command}\n")
    result = await run_cli(["run", "--config", str(config)], b'{"x":1}\n')
    assert (result.returncode, result.stdout) == (0, b'{"x":1}\n')


async def test_agent_env_and_cwd_come_from_the_config(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    script = "import os,sys; sys.stdout.write(os.getcwd() + '|' + os.environ['ACP_TEST_VALUE'] + '\\n')"
    config = tmp_path / "bridge.toml"
    config.write_text(
        f"[agent]\ncommand = {orjson.dumps([sys.executable, '-c', script]).decode()}\n"
        'env = { ACP_TEST_VALUE = "from-config" }\ncwd = "work"\n'
    )
    result = await run_cli(["run", "-c", str(config)])
    assert result.stdout == f"{work.resolve()}|from-config\n".encode()


async def test_a_missing_agent_answers_requests_and_exits_127() -> None:
    result = await run_cli(["run", "--", "/nonexistent/agent"],
                           b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}\n')
    assert result.returncode == 127
    hint = "there is no file at /nonexistent/agent"
    assert orjson.loads(result.stdout) == {
        "jsonrpc": "2.0", "id": 0,
        "error": {"code": -32603, "message": "cannot start agent '/nonexistent/agent': No such file or directory",
                  "data": {"command": ["/nonexistent/agent"], "reason": "No such file or directory", "errno": 2,
                           "hint": hint}},
    }
    assert result.stderr == (b"acp-bridge: ERROR: cannot start agent '/nonexistent/agent': No such file or directory. "
                             + hint.encode() + b".\n")


async def test_an_agent_not_on_path_is_explained_with_what_usually_causes_it() -> None:
    """The usual cause: the editor starts the bridge with its own PATH, not the shell's."""
    result = await run_cli(["run", "--", "acp-bridge-test-no-such-agent", "--acp"],
                           b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}\n')
    assert result.returncode == 127
    error = orjson.loads(result.stdout)["error"]
    assert error["message"] == "cannot start agent 'acp-bridge-test-no-such-agent': No such file or directory"
    hint = ("'acp-bridge-test-no-such-agent' is not in any folder on the PATH the bridge was given; editors start "
            "agents with their own PATH, often not your shell's: give the agent's full path (`command -v "
            "acp-bridge-test-no-such-agent` in your shell prints it)")
    assert error["data"]["hint"] == hint
    stderr = result.stderr.decode()
    assert stderr.count("cannot start agent") == 1
    assert f"No such file or directory. {hint}.\n" in stderr


def test_no_agent_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["run"])
    assert result.exit_code == 2
    assert "no agent command" in result.stderr


def test_check_config_prints_effective_settings(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[suggestions]\nunlock_legacy_agent = true\n[system_prompt]\ntext = "secret"\n')
    result = CliRunner().invoke(main, ["check-config", str(config)])
    assert result.exit_code == 0
    settings = orjson.loads(result.stdout)
    assert settings["suggestions"] == {"enabled": True, "unlock_legacy_agent": True}
    assert settings["system_prompt"]["text"] == "<6 characters>"


def test_check_config_rejects_invalid(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[agent]\ncommand = 5\n")
    result = CliRunner().invoke(main, ["check-config", str(config)])
    assert result.exit_code == 2
    assert "agent.command: expected an array or a string, got int" in result.stderr


def test_help_explains_run() -> None:
    result = CliRunner().invoke(main, ["run", "--help"])
    assert result.exit_code == 0
    for option in ("--config", "--capture", "--system-prompt", "--system-prompt-file", "--system-prompt-mode",
                   "--unlock-legacy-agent", "--no-suggestions", "--strict", "--log-file", "--verbose", "--quiet"):
        assert option in result.output


def test_version() -> None:
    from acp_bridge import __version__

    result = CliRunner().invoke(main, ["--version"])
    assert result.output == f"acp-bridge, version {__version__}\n"


@pytest.mark.parametrize(("args", "message"), [
    (["run", "--system-prompt-mode", "loud", "--", "x"],
     "acp-bridge: Invalid value for '--system-prompt-mode': 'loud' is not one of 'append', 'override'. "
     "(see 'acp-bridge run --help')\n"),
    (["nope"], "acp-bridge: No such command 'nope'. (see 'acp-bridge --help')\n"),
])
def test_usage_errors_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, args, prog_name="acp-bridge")
    assert (result.exit_code, result.stderr) == (2, message)


def test_log_lines_wait_for_a_full_non_blocking_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    """A terminal shared with the non-blocking stdout: logging waits for room, loses nothing.

    The pipe is drained only once the handler has found it full and started waiting (its
    wait is observed), so the test proves the waiting path, whatever the timing."""
    import logging
    import os
    import select
    import threading

    from acp_bridge.shell.logs import StderrHandler

    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    try:
        while True:  # fill the pipe
            os.write(write_end, b"x" * 65536)
    except BlockingIOError:
        pass
    waiting = threading.Event()
    real_select = select.select

    def observed_select(*args: Any) -> Any:
        waiting.set()
        return real_select(*args)

    monkeypatch.setattr(select, "select", observed_select)  # what posix.write_all waits in
    drained = bytearray()

    def drain() -> None:
        assert waiting.wait(5)  # the handler met a full pipe and waits for room
        while not drained.endswith(b"the line\n"):
            drained.extend(os.read(read_end, 1 << 20))

    reader = threading.Thread(target=drain)
    reader.start()
    handler = StderrHandler(write_end)
    handler.emit(logging.LogRecord("acp_bridge", logging.WARNING, __file__, 1, "the line", None, None))
    reader.join(5)
    os.close(read_end)
    os.close(write_end)
    assert waiting.is_set()
    assert drained.endswith(b"the line\n")


def test_bare_command_prints_help_and_exits_0() -> None:
    result = CliRunner().invoke(main, [], prog_name="acp-bridge")
    assert result.exit_code == 0
    assert result.stdout.startswith("Usage: acp-bridge [OPTIONS] COMMAND [ARGS]...")
    assert "demo" in result.stdout and result.stderr == ""


async def test_dash_dash_alone_is_short_for_run() -> None:
    result = await run_cli(["--", *agent_cmd("echo", "--exit", "4")], b'{"x":1}\n')
    assert (result.returncode, result.stdout) == (4, b'{"x":1}\n')


def test_start_hints_name_the_usual_causes(tmp_path: Path) -> None:
    from acp_bridge.shell.run import start_hint

    def enoent(filename: str) -> OSError:
        return FileNotFoundError(2, "No such file or directory", filename)

    script = tmp_path / "agent"
    script.write_text("#!/nonexistent/interpreter\n")
    script.chmod(0o755)
    assert start_hint("agent", enoent("agent"), str(tmp_path), None) == (
        "'agent' is on the PATH, but the interpreter on its #! line is missing")
    assert start_hint(str(script), enoent(str(script)), None, None) == (
        f"{script} exists, but the interpreter on its #! line is missing")
    assert start_hint("./agent", enoent("./agent"), None, str(tmp_path)) == (
        f"{tmp_path}/agent exists, but the interpreter on its #! line is missing")
    assert start_hint("./gone", enoent("./gone"), None, str(tmp_path)) == f"there is no file at {tmp_path}/gone"
    assert start_hint("agent", enoent(str(tmp_path / "w")), None, str(tmp_path / "w")) == (
        f"the agent's working folder {tmp_path / 'w'} ([agent] cwd) does not exist")
    assert start_hint("agent", PermissionError(13, "Permission denied", "agent"), None, None) == (
        "the file is not executable (chmod +x), or a folder on its path cannot be entered")
    assert start_hint("agent", OSError(8, "Exec format error", "agent"), None, None) is None


async def test_unlock_that_unlocks_nothing_says_why_at_v() -> None:
    """--unlock-legacy-agent with an editor that does not advertise suggestions: said at -v."""
    init = example("v1-initialize-request-client-plain")
    result = await run_cli(["run", "-v", "--unlock-legacy-agent", "--", *agent_cmd("echo")], line(init))
    assert result.returncode == 0, result.stderr
    assert result.stderr.count(b"nothing unlocked") == 1
    assert (b'acp-bridge: INFO: --unlock-legacy-agent: nothing unlocked: client "my-client" does not advertise '
            b"session.promptSuggestions") in result.stderr


async def test_a_client_ending_its_agent_with_sigterm_is_no_warning() -> None:
    """SDK clients end every session with SIGTERM: ordinary, so said at -v (info), never as a
    warning."""
    _, err = await signal_running_bridge(["run", "-v", "--", *agent_cmd("echo")], signal.SIGTERM)
    assert b"acp-bridge: INFO: received SIGTERM; passing it to the agent\n" in err
    assert b"WARNING" not in err, err


# -- the short form: `acp-bridge [RUN OPTIONS] -- AGENT` is `acp-bridge run [RUN OPTIONS] -- AGENT` --

def short_form_options(tmp_path: Path) -> dict[str, list[list[str]]]:
    """Each option of `run`, by parameter name, in the spellings a user may give it."""
    config = tmp_path / "c.toml"
    config.write_text("[relay]\ngrace_seconds = 1\n")
    prompt = tmp_path / "prompt.md"
    prompt.write_text("from a file\n")
    log = str(tmp_path / "bridge.log")
    return {
        "config_file": [["-c", str(config)], ["--config", str(config)], [f"--config={config}"], [f"-c{config}"]],
        "capture": [["--capture", "x-{pid}.jsonl"], ["--capture=x.jsonl"]],
        "system_prompt": [["--system-prompt", "Be brief."]],
        "system_prompt_file": [["--system-prompt-file", str(prompt)]],
        "system_prompt_mode": [["--system-prompt-mode", "override"]],
        "unlock_legacy_agent": [["--unlock-legacy-agent"]],
        "no_suggestions": [["--no-suggestions"]],
        "no_health": [["--no-health"]],
        "strict": [["--strict"]],
        "log_file": [["--log-file", log]],
        "verbose": [["-v"], ["-vv"], ["--verbose"]],
        "quiet": [["-q"], ["--quiet"]],
        "otlp": [["--otlp"]],
        "otlp_content": [["--otlp-content"]],
    }


def test_the_short_form_takes_every_run_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from acp_bridge.commands import cli

    seen: list[Any] = []
    monkeypatch.setattr(cli, "run_and_report", keeper(seen))
    monkeypatch.setattr(cli, "setup_logging", lambda config: None)
    monkeypatch.chdir(tmp_path)
    options = short_form_options(tmp_path)
    run_options = {p.name for p in cli.run.params if isinstance(p, click.Option)}
    assert set(options) == run_options  # a new option of `run` must be tried here too
    runner = CliRunner()
    assert runner.invoke(main, ["run", "--", "my-agent", "--flag"]).exit_code == 0
    plain = seen[-1]
    for spellings in options.values():
        for spelling in spellings:
            long = runner.invoke(main, ["run", *spelling, "--", "my-agent", "--flag"])
            short = runner.invoke(main, [*spelling, "--", "my-agent", "--flag"])
            assert (long.exit_code, short.exit_code) == (0, 0), (spelling, long.stderr, short.stderr)
            assert seen[-1] == seen[-2] != plain, spelling
    # several at once, and the agent from the config file (no `--` at all)
    config = tmp_path / "agent.toml"
    config.write_text('[agent]\ncommand = ["my-agent"]\n')
    result = runner.invoke(main, ["-v", "--capture", "x.jsonl", "--strict", "-c", str(config)])
    assert result.exit_code == 0, result.stderr
    assert (seen[-1].verbosity, seen[-1].capture.path, seen[-1].strict, seen[-1].agent.command) == (
        1, "x.jsonl", True, ("my-agent",))


@pytest.mark.parametrize(("args", "message"), [
    (["--capture"], "acp-bridge: Option '--capture' requires an argument."),
    (["--bogus", "--", "x"], "acp-bridge: No such option"),
    (["-v"], "acp-bridge: no agent command"),
])
def test_the_short_form_reports_usage_errors_in_one_line(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, args, prog_name="acp-bridge")
    assert result.exit_code == 2
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr


async def test_the_short_form_with_options_runs_the_bridge(tmp_path: Path) -> None:
    capture = tmp_path / "x.jsonl"
    result = await run_cli(["--capture", str(capture), "-v", "--", *agent_cmd("echo")], b'{"x":1}\n')
    assert (result.returncode, result.stdout) == (0, b'{"x":1}\n'), result.stderr
    assert b"INFO: agent started" in result.stderr
    assert b'"type":"header"' in capture.read_bytes()  # the capture was written
