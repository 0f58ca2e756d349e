"""The TOML file's reader (config/file.py): what it reads, and what it refuses.

Configuration the user got wrong: exit 2, one line naming the file, the key and the problem,
before the agent starts; never a traceback (spec/interface.md, "Exit status of `run`").
Each case here crashed, or was let through to crash later, before it was checked at load time.

`[agent] command` as one string is split as a shell would (shlex.split), never taken whole
as a program name; a string a shell could not split is a configuration error (exit 2).
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from acp_bridge.commands import main
from tests.config.conftest import one_line, refused
from tests.conftest import agent_cmd, keeper, run_cli


@pytest.mark.parametrize(
    ("toml", "key", "problem"),
    [
        # numbers: TOML has nan and inf, and a negative or zero value makes no sense
        pytest.param("[relay]\ngrace_seconds = nan\n", "relay.grace_seconds", "must be a finite number of seconds, got nan", id="grace-nan"),
        pytest.param("[relay]\ngrace_seconds = -nan\n", "relay.grace_seconds", "must be a finite number", id="grace-minus-nan"),
        pytest.param("[relay]\ngrace_seconds = inf\n", "relay.grace_seconds", "must be a finite number of seconds, got inf", id="grace-inf"),
        pytest.param("[relay]\ngrace_seconds = -1\n", "relay.grace_seconds", "must not be negative, got -1", id="grace-negative"),
        pytest.param("[relay]\ngrace_seconds = -0.5\n", "relay.grace_seconds", "must not be negative", id="grace-negative-float"),
        pytest.param("[relay]\ngrace_seconds = true\n", "relay.grace_seconds", "expected an integer or a number, got a boolean", id="grace-bool"),
        pytest.param("[relay]\nparse_limit_mib = 0\n", "relay.parse_limit_mib", "must be a positive whole number of MiB, got 0", id="limit-zero"),
        pytest.param("[relay]\nparse_limit_mib = -3\n", "relay.parse_limit_mib", "must be a positive whole number", id="limit-negative"),
        pytest.param("[relay]\nparse_limit_mib = nan\n", "relay.parse_limit_mib", "expected an integer, got float", id="limit-nan"),
        pytest.param("[relay]\nparse_limit_mib = inf\n", "relay.parse_limit_mib", "expected an integer, got float", id="limit-inf"),
        pytest.param("[relay]\nparse_limit_mib = true\n", "relay.parse_limit_mib", "expected an integer, got a boolean", id="limit-bool"),
        pytest.param("[bridge]\nverbosity = true\n", "bridge.verbosity", "expected an integer, got a boolean", id="verbosity-bool"),
        # the agent's command line, environment and folder
        pytest.param("[agent]\ncommand = []\n", "agent.command", "must not be empty", id="command-empty-list"),
        pytest.param('[agent]\ncommand = [""]\n', "agent.command", "the program (the first item) is an empty string", id="command-empty-program"),
        pytest.param('[agent]\ncommand = ["a", "b\\u0000c"]\n', "agent.command", "has a NUL character", id="command-nul"),
        pytest.param('[agent]\ncommand = ["a"]\nenv = { "A=B" = "x" }\n', "agent.env.A=B", "not a valid environment variable name", id="env-name-equals"),
        pytest.param('[agent]\ncommand = ["a"]\nenv = { "" = "x" }\n', "agent.env.", "not a valid environment variable name", id="env-name-empty"),
        pytest.param('[agent]\ncommand = ["a"]\nenv = { A = "x\\u0000y" }\n', "agent.env.A", "has a NUL character", id="env-value-nul"),
        pytest.param('[agent]\ncommand = ["a"]\nenv = { A = 1 }\n', "agent.env.A", "expected a string, got int", id="env-value-int"),
        pytest.param('[agent]\ncommand = ["a"]\ncwd = "a\\u0000b"\n', "agent.cwd", "has a NUL character", id="cwd-nul"),
        pytest.param('[agent]\ncommand = ["a"]\ncwd = "missing"\n', "agent.cwd", "not a directory", id="cwd-missing"),
        # files named in the config
        pytest.param('[system_prompt]\nfile = "a\\u0000b"\n', "system_prompt.file", "has a NUL character", id="prompt-file-nul"),
        pytest.param('[system_prompt]\nfile = "."\n', "system_prompt.file", "is a directory, not a file", id="prompt-file-directory"),
        pytest.param('[system_prompt]\nfile = "latin1.md"\n', "system_prompt.file", "is not UTF-8", id="prompt-file-not-utf8"),
        pytest.param('[system_prompt]\nfile = "loop.md"\n', "system_prompt.file", "Too many levels of symbolic links", id="prompt-file-symlink-loop"),
        pytest.param('[bridge]\nlog_file = "a\\u0000b"\n', "bridge.log_file", "has a NUL character", id="log-file-nul"),
        pytest.param('[capture]\npath = "a\\u0000b"\n', "capture.path", "has a NUL character", id="capture-nul"),
        pytest.param('[capture]\npath = "x-{pid:s}.jsonl"\n', "capture.path", "bad template 'x-{pid:s}.jsonl'", id="capture-format-spec"),
        pytest.param('[capture]\npath = "x-{time:d}.jsonl"\n', "capture.path", "bad template", id="capture-format-spec-time"),
        pytest.param('[capture]\npath = "x-{}.jsonl"\n', "capture.path", "unknown placeholder {}", id="capture-positional"),
        pytest.param('[capture]\npath = ""\n', "capture.path", "is empty; name a capture file", id="capture-empty"),
        pytest.param('[capture]\npath = "caps/"\n', "capture.path", "caps/ names a directory, not a file",
                     id="capture-trailing-slash"),
        pytest.param('[capture]\npath = "."\n', "capture.path", ". names a directory, not a file", id="capture-dot"),
        pytest.param('[capture]\npath = "latin1.md/c.jsonl"\n', "capture.path", "latin1.md is not a directory",
                     id="capture-under-a-file"),
        pytest.param('[capture]\npath = "/dev"\n', "capture.path", "/dev is a directory, not a file", id="capture-a-directory"),
        pytest.param('[capture]\npath = "/dev/null"\n', "capture.path", "/dev/null is a character device, not a regular file",
                     id="capture-a-device"),
        pytest.param('[capture]\nredact = ["/a~2b"]\n', "capture.redact", "'/a~2b' is not a JSON pointer (RFC 6901: ~ is written ~0", id="pointer-bad-escape"),
        pytest.param('[capture]\nredact = [1]\n', "capture.redact", "1 is not a JSON pointer", id="pointer-not-string"),
        # shapes
        pytest.param("strict = true\n", "strict", "unknown key (known tables:", id="top-level-key"),
        pytest.param("relay = 3\n", "relay", "must be a table", id="table-not-table"),
    ],
)
def test_bad_value_is_exit_2_with_file_and_key_before_the_agent_starts(
        tmp_path: Path, toml: str, key: str, problem: str) -> None:
    """run and check-config both refuse the file, in one line, and the agent never starts."""
    (tmp_path / "latin1.md").write_bytes("Caf\xe9 rules".encode("latin-1"))
    (tmp_path / "loop.md").symlink_to(tmp_path / "loop.md")
    marker = tmp_path / "started"
    config = tmp_path / "bad.toml"
    config.write_text(toml, encoding="utf-8")
    agent = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    for args in (["run", "-c", str(config), "--", *agent], ["check-config", str(config)]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, (args, result.output, result.exception)
        line = one_line(result.stderr)
        assert line.startswith(f"acp-bridge: {config}: {key}"), line
        assert problem in line, line
    assert not marker.exists()


async def test_nan_grace_seconds_is_refused_by_the_real_cli(tmp_path: Path) -> None:
    """`grace_seconds = nan` used to pass check-config and crash the bridge at shutdown."""
    config = tmp_path / "bridge.toml"
    config.write_text("[relay]\ngrace_seconds = nan\n")
    pidfile = tmp_path / "agent.pid"
    result = await run_cli(["run", "-c", str(config), "--", *agent_cmd("echo")], b'{"x":1}\n',
                           env={"FAKE_AGENT_PIDFILE": str(pidfile)})
    assert (result.returncode, result.stdout) == (2, b"")
    assert result.stderr == (f"acp-bridge: {config}: relay.grace_seconds: must be a finite number of "
                             "seconds, got nan\n").encode()
    assert not pidfile.exists()
    checked = await run_cli(["check-config", str(config)])
    assert (checked.returncode, checked.stdout) == (2, b"")


@pytest.mark.parametrize(("toml", "expected"), [
    pytest.param("[relay]\ngrace_seconds = 0\n", 0.0, id="zero-grace"),
    pytest.param("[relay]\ngrace_seconds = 0.25\n", 0.25, id="fraction"),
    pytest.param("[relay]\ngrace_seconds = 86400\n", 86400.0, id="a-day"),
])
def test_sound_grace_seconds_are_kept(tmp_path: Path, toml: str, expected: float) -> None:
    config = tmp_path / "c.toml"
    config.write_text(toml)
    result = CliRunner().invoke(main, ["check-config", str(config)])
    assert result.exit_code == 0, result.stderr
    assert orjson.loads(result.stdout)["relay"]["grace_seconds"] == expected


def test_a_config_file_that_is_not_utf8(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_bytes(b'[system_prompt]\ntext = "caf\xe9"\n')
    result = CliRunner().invoke(main, ["check-config", str(config)])
    assert result.exit_code == 2
    assert one_line(result.stderr).startswith(f"acp-bridge: {config}: not UTF-8 (TOML files are UTF-8)")


def test_a_config_file_that_is_a_symlink_loop(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.symlink_to(config)
    result = CliRunner().invoke(main, ["run", "-c", str(config), "--", "agent"])
    assert result.exit_code == 2
    assert one_line(result.stderr).startswith(f"acp-bridge: {config}: cannot read config file:")


def test_agent_cwd_that_is_a_symlink_loop(tmp_path: Path) -> None:
    (tmp_path / "w").symlink_to(tmp_path / "w")
    config = tmp_path / "c.toml"
    config.write_text('[agent]\ncommand = ["a"]\ncwd = "w"\n')
    result = CliRunner().invoke(main, ["check-config", str(config)])
    assert result.exit_code == 2
    assert one_line(result.stderr).startswith(f"acp-bridge: {config}: agent.cwd: ")


@pytest.mark.parametrize("where", ["option", "file"])
async def test_a_log_file_that_cannot_be_opened_is_exit_2_not_a_traceback(tmp_path: Path, where: str) -> None:
    """It used to end in an uncaught IsADirectoryError / FileNotFoundError traceback."""
    pidfile = tmp_path / "agent.pid"
    if where == "option":
        args = ["--log-file", str(tmp_path / "missing" / "bridge.log")]
        expected = f"acp-bridge: --log-file: cannot open {tmp_path / 'missing' / 'bridge.log'}: No such file or directory\n"
    else:
        config = tmp_path / "c.toml"
        config.write_text('[bridge]\nlog_file = "."\n')
        args = ["-c", str(config)]
        expected = f"acp-bridge: {config}: bridge.log_file: cannot open {tmp_path}: Is a directory\n"
    result = await run_cli(["run", *args, "--", *agent_cmd("echo")], b'{"x":1}\n',
                           env={"FAKE_AGENT_PIDFILE": str(pidfile)})
    assert (result.returncode, result.stdout, result.stderr.decode()) == (2, b"", expected)
    assert not pidfile.exists()


def test_toml_nested_too_deeply_is_exit_2_not_a_recursion_error(tmp_path: Path) -> None:
    """tomllib reads nested arrays recursively: a deep one raised RecursionError."""
    config = tmp_path / "c.toml"
    config.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    result = CliRunner().invoke(main, ["check-config", str(config)])
    assert result.exit_code == 2
    assert one_line(result.stderr) == f"acp-bridge: {config}: not valid TOML: arrays or tables nested too deeply"


@pytest.mark.parametrize("how", ["config", "prompt-option", "prompt-key"])
def test_a_file_without_end_is_refused_not_read_into_memory(tmp_path: Path, how: str) -> None:
    """/dev/zero (or any file over 16 MiB) named as a config or prompt file used to be read
    until memory ran out."""
    config = tmp_path / "c.toml"
    config.write_text('[system_prompt]\nfile = "/dev/zero"\n')
    args = {"config": ["-c", "/dev/zero"], "prompt-option": ["--system-prompt-file", "/dev/zero"],
            "prompt-key": ["-c", str(config)]}[how]
    result = CliRunner().invoke(main, ["run", *args, "--", "agent"])
    assert result.exit_code == 2
    line = one_line(result.stderr)
    assert "/dev/zero" in line and line.endswith(": larger than 16 MiB"), line


def test_a_prompt_file_with_windows_line_ends_reads_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from acp_bridge.commands import run

    seen: list[Any] = []
    monkeypatch.setattr(run, "run_and_report", keeper(seen))
    monkeypatch.setattr(run, "setup_logging", lambda config: None)
    prompt = tmp_path / "p.md"
    prompt.write_bytes(b"One.\r\nTwo.\r\n\r\n")
    CliRunner().invoke(main, ["run", "--system-prompt-file", str(prompt), "--", "agent"])
    assert [c.system_prompt.text for c in seen] == ["One.\nTwo."]


@pytest.mark.parametrize(("toml", "message"), [
    pytest.param('[agent]\ncommand = ["a", 1]\n', "agent.command: every item must be a string", id="command-item"),
    pytest.param('[agent]\ncommand = ["a", true]\n', "agent.command: every item must be a string", id="command-bool"),
    pytest.param('[agent]\nenv = { A = 1 }\n', "agent.env.A: expected a string, got int", id="env-value"),
    pytest.param('[health]\nmethods = { "session/new" = "5" }\n', "health.methods.session/new: expected a number "
                 "of seconds, got str", id="health-method-type"),
    pytest.param('[health]\nmethods = { "session/new" = -1 }\n', "health.methods.session/new: must not be "
                 "negative, got -1", id="health-method-negative"),
    pytest.param('[health]\nrequest_seconds = nan\n', "health.request_seconds: must be a finite number of "
                 "seconds, got nan", id="health-nan"),
    pytest.param('[capture]\nredact = [1]\n', "capture.redact: 1 is not a JSON pointer (a string, RFC 6901)",
                 id="redact-item"),
    pytest.param('[capture]\nredact = ["x"]\n', "capture.redact: 'x' is not a JSON pointer (RFC 6901: starts with /)",
                 id="redact-relative"),
    pytest.param('[capture]\nredact = ["/a~~01"]\n',
                 "capture.redact: '/a~~01' is not a JSON pointer (RFC 6901: ~ is written ~0 and / is written ~1)",
                 id="redact-tilde-before-escape"),
])
def test_items_of_arrays_and_tables(tmp_path: Path, toml: str, message: str) -> None:
    assert refused(tmp_path, toml) == message


def toml_string(text: str) -> str:
    return json.dumps(text)  # a JSON string is a TOML basic string for what these tests write


@pytest.mark.parametrize(("command", "argv"), [
    ("my-agent --flag", ["my-agent", "--flag"]),
    ("my-agent", ["my-agent"]),
    ("  /opt/My\\ Agent/bin/agent --model 'big one' \"--x=1 2\"  ",
     ["/opt/My Agent/bin/agent", "--model", "big one", "--x=1 2"]),
])
def test_check_config_shows_the_split_command(tmp_path: Path, command: str, argv: list[str]) -> None:
    config = tmp_path / "c.toml"
    config.write_text(f"[agent]\ncommand = {toml_string(command)}\n")
    result = CliRunner().invoke(main, ["check-config", str(config)])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["agent"]["command"] == argv


@pytest.mark.parametrize(("command", "problem"), [
    ("my-agent 'unclosed", "cannot be split as a shell would: No closing quotation"),
    ("   ", "must not be empty"),
    ("''", "the program (the first item) is an empty string"),
])
def test_a_string_that_does_not_split_is_exit_2(tmp_path: Path, command: str, problem: str) -> None:
    config = tmp_path / "c.toml"
    config.write_text(f"[agent]\ncommand = {toml_string(command)}\n")
    result = CliRunner().invoke(main, ["check-config", str(config)])
    assert result.exit_code == 2
    assert result.stderr == f"acp-bridge: {config}: agent.command: {problem}\n"


async def test_run_starts_the_split_command(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(f"[agent]\ncommand = {toml_string(shlex.join(agent_cmd('echo')))}\n")
    result = await run_cli(["run", "-c", str(config)], b'{"x":1}\n')
    assert (result.returncode, result.stdout) == (0, b'{"x":1}\n'), result.stderr


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        pytest.param("[relay]\nbogus = 1\n", "relay.bogus: unknown key", id="unknown-key"),
        pytest.param("[nope]\n", "nope: unknown table", id="unknown-table"),
        pytest.param("[relay]\ngrace_seconds = \"5\"\n", "relay.grace_seconds: expected an integer or a number, got str", id="wrong-type"),
        pytest.param("[suggestions]\nenabled = 1\n", "suggestions.enabled: expected a boolean, got int", id="int-for-bool"),
        pytest.param("[system_prompt]\nmode = \"loud\"\n", "system_prompt.mode: 'loud' is not one of append, override", id="bad-choice"),
        pytest.param("[relay]\nstray_output = \"drop\"\n", "relay.stray_output: 'drop' is not one of forward, stderr",
                     id="bad-stray-output"),
        pytest.param("[system_prompt]\nfile = \"missing.md\"\n", "system_prompt.file: cannot read", id="missing-prompt-file"),
        pytest.param("[system_prompt]\ntext = \"  \"\n", "system_prompt.text: is empty", id="empty-prompt"),
        pytest.param("[capture]\npath = \"x-{when}.jsonl\"\n", "capture.path: unknown placeholder {when}", id="bad-template"),
        pytest.param("[capture]\nredact = [\"params\"]\n", "capture.redact: 'params' is not a JSON pointer", id="bad-pointer"),
        pytest.param("[relay\n", "not valid TOML", id="bad-toml"),
        pytest.param("[bridge]\nverbosity = 7\n", "bridge.verbosity: must be -1 (quiet), 0, 1 or 2", id="bad-verbosity"),
    ],
)
def test_config_errors_name_file_and_key_and_exit_2(tmp_path: Path, toml: str, message: str) -> None:
    marker = tmp_path / "started"
    config = tmp_path / "bad.toml"
    config.write_text(toml)
    agent = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    result = CliRunner().invoke(main, ["run", "-c", str(config), "--", *agent])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert str(config) in lines[0] and message in lines[0]
    assert not marker.exists()


def test_missing_config_file_is_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", "-c", str(tmp_path / "nope.toml"), "--", "true"])
    assert result.exit_code == 2
    assert result.stderr == f"acp-bridge: {tmp_path / 'nope.toml'}: config file not found\n"
