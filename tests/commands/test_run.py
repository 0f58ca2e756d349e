"""`acp-bridge run`: its options and their help, and end to end, a real bridge process in front
of a real agent process (or, where the process is not the subject, `run` in this process on
real pipes in front of a real agent process: tests/cli_helpers.py).

`run --help` names every ACP_BRIDGE_* variable the code reads and, for each option, its config
key, and those keys are keys of the file.
"""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

import click
import orjson
import pytest
from click.testing import CliRunner

import acp_bridge
from acp_bridge.commands import main, run
from acp_bridge.config.schema import schema
from tests.cli_helpers import run_cli_in_process
from tests.conftest import agent_cmd, example, line, run_cli, signal_running_bridge

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


@pytest.mark.parametrize(("options", "stream", "process"), [
    pytest.param(["--no-suggestions"], MIXED, True, id="every-feature-off"),
    pytest.param([], MIXED.replace(SUGGESTION, b""), False, id="defaults-no-rule-applies"),
])
async def test_mixed_stream_comes_back_byte_exact_through_an_echo_agent(options: list[str], stream: bytes,
                                                                        process: bool) -> None:
    """Every line, valid or not, is relayed as it came: the agent echoes, the client gets it.

    (With the defaults, the legacy suggestion would be withheld from this client, which did
    not advertise suggestions: that is a rule applying, tested in test_run_suggestions.py.)
    The batch's request was never answered (the echo agent sends it back as a request), so
    when the agent exits the bridge answers it, on a line of its own after the torn last one.
    Every feature off through the real CLI process; the defaults in this process.
    """
    result = await (run_cli if process else run_cli_in_process)(["run", *options, "--", *agent_cmd("echo")], stream)
    assert result.returncode == 0, result.stderr
    answer = (b'{"jsonrpc":"2.0","id":9,"error":{"code":-32603,"message":"agent exited with status 0 '
              b'before answering","data":{"exitStatus":0}}}\n')
    assert result.stdout == stream + b"\n" + answer


async def test_an_8_mib_line_is_relayed_whole() -> None:
    big = b'{"jsonrpc":"2.0","method":"_big","params":"' + b"a" * (8 * 1024 * 1024) + b'"}\n'
    result = await run_cli_in_process(["run", "--", *agent_cmd("echo")], big + b"{}\n")
    assert result.returncode == 0
    assert result.stdout == big + b"{}\n"


async def test_a_line_over_the_parse_limit_is_relayed_whole(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[relay]\nparse_limit_mib = 1\n")
    big = b'{"jsonrpc":"2.0","id":1,"method":"x","params":"' + b"b" * (3 * 1024 * 1024) + b'"}\n'
    result = await run_cli_in_process(["run", "-c", str(config), "--", *agent_cmd("echo")], big)
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
    result = await run_cli_in_process(["run", "-c", str(config)])
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
    result = await run_cli_in_process(["run", "--", "acp-bridge-test-no-such-agent", "--acp"],
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


def test_no_agent_command_at_a_terminal_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("acp_bridge.commands.run._stdin_is_a_terminal", lambda: True)
    result = CliRunner().invoke(main, ["run"])
    assert result.exit_code == 2
    assert "no agent command" in result.stderr and "docs/proxy-chains.md" in result.stderr


async def test_no_agent_command_and_nothing_on_stdin_is_a_usage_error() -> None:
    """Not a terminal, so a chain's component, but nothing came: said, with the fix, exit 2."""
    result = await run_cli(["run"], b"")
    assert (result.returncode, result.stdout) == (2, b"")
    assert result.stderr.decode().splitlines() == [
        "acp-bridge: ERROR: no agent command, and stdin ended before a conductor's first message: give the "
        "agent's command after `--` (acp-bridge run -- AGENT), or start it as a proxy under an ACP conductor"]


def test_help_explains_run() -> None:
    result = CliRunner().invoke(main, ["run", "--help"])
    assert result.exit_code == 0
    for option in ("--config", "--capture", "--system-prompt", "--system-prompt-file", "--system-prompt-mode",
                   "--unlock-legacy-agent", "--no-suggestions", "--strict", "--log-file", "--verbose", "--quiet"):
        assert option in result.output


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
    result = await run_cli_in_process(["run", "-v", "--unlock-legacy-agent", "--", *agent_cmd("echo")], line(init))
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


PACKAGE = Path(acp_bridge.__file__).parent


VARIABLE = re.compile(r"\bACP_BRIDGE_[A-Z][A-Z0-9_]*")


def run_help() -> str:
    result = CliRunner().invoke(main, ["run", "--help"], terminal_width=80)
    assert result.exit_code == 0
    return " ".join(result.output.split())  # as read, not as wrapped


def variables_in_the_code() -> set[str]:
    found: set[str] = set()
    for source in PACKAGE.rglob("*.py"):
        found.update(VARIABLE.findall(source.read_text(encoding="utf-8")))
    return found


def test_run_help_names_every_variable_the_code_reads() -> None:
    variables = variables_in_the_code()
    assert "ACP_BRIDGE_CONFIG" in variables and len(variables) >= 9  # the grep works
    shown = run_help()
    missing = sorted(v for v in variables if f"[env var: {v}]" not in shown)
    assert missing == []


def test_each_option_with_a_variable_shows_it() -> None:
    shown = run_help()
    for param in run.run.params:
        if isinstance(param, click.Option) and param.envvar:
            assert f"[env var: {param.envvar}]" in shown, param.name


def test_run_help_names_the_config_key_of_each_option_and_the_keys_exist() -> None:
    shown = run_help()
    options_part = shown.split("Settings:")[0]  # the epilog explains the notation
    keys = re.findall(r"\[config: ([a-z_]+)\.([a-z_]+)", options_part)
    options = [p for p in run.run.params if isinstance(p, click.Option) and p.name != "config_file"]
    assert len(keys) == len(options)  # every option but -c itself has a key in the file
    tables = schema()
    for table, key in keys:
        assert key in tables[table], f"{table}.{key}"
    assert "the command line wins, then the environment, then the file" in shown


def test_an_invalid_value_names_the_spelling_that_gave_it() -> None:
    runner = CliRunner()
    from_env = runner.invoke(main, ["run", "--", "x"], env={"ACP_BRIDGE_SYSTEM_PROMPT_MODE": "loud"})
    assert from_env.exit_code == 2
    assert from_env.stderr.startswith("acp-bridge: Invalid value for 'ACP_BRIDGE_SYSTEM_PROMPT_MODE': 'loud'")
    from_line = runner.invoke(main, ["run", "--system-prompt-mode", "loud", "--", "x"])
    assert from_line.stderr.startswith("acp-bridge: Invalid value for '--system-prompt-mode': 'loud'")


def test_a_capture_path_under_a_tilde_lands_in_the_home_folder_when_no_shell_expands_it(tmp_path: Path) -> None:
    """As an editor starts the bridge: an argument list, no shell. `~/caps/...` made a folder
    named `~` in the editor's working directory."""
    import subprocess

    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "acp_bridge", "run", "--capture", "~/caps/{pid}.jsonl", "--",
         sys.executable, "-c", "import sys; sys.stdin.read()"],
        stdin=subprocess.DEVNULL, capture_output=True, cwd=work, env={**os.environ, "HOME": str(home)},
        timeout=60, check=False)
    assert (done.returncode, done.stdout, list(work.iterdir())) == (0, b"", []), done.stderr
    assert [p.suffix for p in (home / "caps").iterdir()] == [".jsonl"]
