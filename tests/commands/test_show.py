"""`acp-bridge show` on a small fixed capture: exact output lines."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from acp_bridge.capture.records import dumps, header_record
from acp_bridge.commands import main
from tests.commands.sample_capture import HEADER, NOTE, RECORDS, WALL, invoke, rec


def test_show_one_line_per_message(capture: Path, utc: None) -> None:
    assert invoke("show", str(capture)) == [
        "22:13:20.000 -> session/prompt id 1 (s1) 91B->118B [rewrite: system-prompt]",
        "22:13:20.500 <- session/update agent_message_chunk (s1) 121B",
        "22:13:20.600 <- (not JSON-RPC) 4B",
        "22:13:21.250 <- session/prompt id 1 ok 1.25s (s1) 60B",
        "22:13:22.000 -> session/cancel id 2 (s2) 10B",
    ]


def test_show_plain_in_a_pipe(capture: Path, utc: None) -> None:
    """CliRunner is not a terminal: no escape codes."""
    assert "\x1b[" not in "".join(invoke("show", str(capture)))


@pytest.mark.parametrize(("options", "seqs"), [
    (["--method", "session/prompt"], ["id 1 (s1) 91B", "session/prompt id 1 ok"]),
    (["--session", "s2"], ["session/cancel"]),
    (["--direction", "to-client"], ["session/update", "(not JSON-RPC)", "session/prompt id 1 ok"]),
    (["--direction", "to-agent", "--method", "session/cancel"], ["session/cancel"]),
    (["--seq", "4", "--seq", "2"], ["session/update", "session/prompt id 1 ok"]),  # as check names them, in order
    (["--seq", "4", "--direction", "to-agent"], []),
])
def test_show_filters(capture: Path, utc: None, options: list[str], seqs: list[str]) -> None:
    lines = invoke("show", str(capture), *options)
    assert len(lines) == len(seqs)
    assert all(part in text for part, text in zip(seqs, lines, strict=True))


@pytest.mark.parametrize(("options", "in_force"), [
    (["--method", "session/promt"], "(--method session/promt)"),
    (["--session", "nope", "--direction", "to-agent"], "(--session nope, --direction to-agent)"),
    (["--detail", "0"], "(--detail 0 (only failures))"),
    (["--seq", "6", "--seq", "0"], "(--seq 6, --seq 0)"),
])
def test_show_says_when_nothing_matched(capture: Path, options: list[str], in_force: str) -> None:
    """Nothing shown is not silence: stderr counts the records read and names the filters."""
    result = CliRunner().invoke(main, ["show", str(capture), *options])
    assert result.exit_code == 0 and result.stdout == ""
    assert result.stderr == f"acp-bridge: {capture}: 7 records read, none matched {in_force}\n"


def test_show_says_nothing_when_something_matched(capture: Path) -> None:
    result = CliRunner().invoke(main, ["show", str(capture), "--method", "session/cancel"])
    assert result.exit_code == 0 and result.stderr == "" and result.stdout.count("\n") == 1


LONG_A, LONG_B = "0f3c9a7e-41d2-4c55-9b0e-7d1f2a3b4c5d", "0f3c9a7e-99aa-4bbb-8ccc-000000000001"


@pytest.fixture
def long_sessions(tmp_path: Path) -> Path:
    path = tmp_path / "long.jsonl"
    records = [rec(1, 0.0, "to-agent", "request", "pass", method="session/prompt", id=1, session=LONG_A, size=3,
                   raw="{}\n"),
               rec(2, 1.0, "to-agent", "request", "pass", method="session/prompt", id=2, session=LONG_B, size=3,
                   raw="{}\n"),
               rec(3, 2.0, "to-agent", "request", "pass", method="session/prompt", id=3, session="0f3c9a7e", size=3,
                   raw="{}\n")]
    path.write_bytes(HEADER + b"".join(dumps(r) for r in records))  # a capture begins with its header
    return path


def test_show_shortens_long_session_ids(long_sessions: Path, utc: None) -> None:
    assert invoke("show", str(long_sessions)) == [
        "22:13:20.000 -> session/prompt id 1 (0f3c9a7e…) 3B",
        "22:13:21.000 -> session/prompt id 2 (0f3c9a7e…) 3B",
        "22:13:22.000 -> session/prompt id 3 (0f3c9a7e) 3B",
    ]


def test_show_session_takes_a_unique_prefix(long_sessions: Path) -> None:
    assert [line.split()[4] for line in invoke("show", str(long_sessions), "--session", "0f3c9a7e-4")] == ["1"]
    assert [line.split()[4] for line in invoke("show", str(long_sessions), "--session", LONG_B)] == ["2"]
    # an id that is also the start of others means itself
    assert [line.split()[4] for line in invoke("show", str(long_sessions), "--session", "0f3c9a7e")] == ["3"]


def test_show_session_prefix_of_several_is_an_error(long_sessions: Path) -> None:
    result = CliRunner().invoke(main, ["show", str(long_sessions), "--session", "0f3c9a7e-"])
    assert result.exit_code == 2 and result.stdout == ""
    assert f"'0f3c9a7e-' is the start of 2 sessions: {LONG_A}, {LONG_B}" in result.stderr


def update_line(kind: str) -> str:
    return ('{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"'
            + kind + '"}}}\n')


@pytest.fixture
def suggestions(tmp_path: Path) -> Path:
    """An agent's session_info_update dropped and sent on as a prompt_suggestions_update."""
    path = tmp_path / "suggestions.jsonl"
    info, sugg = update_line("session_info_update"), update_line("prompt_suggestions_update")
    records = [
        rec(1, 0.0, "to-client", "notification", "pass", method="session/update", session="s1", size=len(NOTE),
            raw=NOTE),
        rec(2, 1.0, "to-client", "notification", "drop", method="session/update", session="s1",
            rules=["suggestions"], size=len(info), raw=info, out=None, out_size=0),
        rec(3, 1.0, "to-client", "notification", "emit", method="session/update", session="s1",
            rules=["suggestions"], size=0, out=sugg, out_size=len(sugg)),
        rec(4, 2.0, "to-client", "notification", "pass", method="session/updatex", session="s1", size=len(sugg),
            raw=sugg),
    ]
    path.write_bytes(HEADER + b"".join(dumps(r) for r in records))  # a capture begins with its header
    return path


def test_show_filters_by_update_kind(suggestions: Path, utc: None) -> None:
    assert invoke("show", str(suggestions), "--update", "prompt_suggestions_update") == [
        "22:13:21.000 <- session/update prompt_suggestions_update (s1) 127B [bridge: suggestions]"]
    assert invoke("show", str(suggestions), "--update", "session_info_update") == [
        "22:13:21.000 <- session/update session_info_update (s1) 121B->0B [drop: suggestions]"]
    both = invoke("show", str(suggestions), "--update", "agent_message_chunk", "--update", "session_info_update")
    assert [line.split()[3] for line in both] == ["agent_message_chunk", "session_info_update"]
    result = CliRunner().invoke(main, ["show", str(suggestions), "--update", "prompt_suggestion_update"])
    assert result.exit_code == 0 and result.stdout == ""
    assert "5 records read, none matched (--update prompt_suggestion_update)" in result.stderr


def test_show_detail_levels(capture: Path, utc: None) -> None:
    two = invoke("show", str(capture), "--detail", "2", "--session", "s1", "--method", "session/prompt")
    assert two[:3] == ["22:13:20.000 -> session/prompt id 1 (s1) 91B->118B [rewrite: system-prompt]",
                       "    {", '      "sessionId": "s1",']
    three = invoke("show", str(capture), "--detail", "3", "--method", "session/prompt")
    assert three == [
        "22:13:20.000 -> session/prompt id 1 (s1) 91B->118B [rewrite: system-prompt]",
        "  before:", "    {", '      "jsonrpc": "2.0",', '      "id": 1,', '      "method": "session/prompt",',
        '      "params": {', '        "sessionId": "s1",', '        "prompt": []', "      }", "    }",
        "  after:", "    {", '      "jsonrpc": "2.0",', '      "id": 1,', '      "method": "session/prompt",',
        '      "params": {', '        "sessionId": "s1",', '        "prompt": [', "          {",
        '            "type": "text",', '            "text": "hi"', "          }", "        ]", "      }", "    }",
        "22:13:21.250 <- session/prompt id 1 ok 1.25s (s1) 60B",
        "    {", '      "stopReason": "end_turn"', "    }",
    ]


def test_show_reports_unreadable_lines(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(HEADER + b"garbage\n")
    result = CliRunner().invoke(main, ["show", str(path)])
    assert (result.exit_code, result.output) == (2, f"acp-bridge: {path}:2: not a capture record\n")


def test_show_follow_prints_records_as_they_are_written(capture: Path, tmp_path: Path) -> None:
    """--follow waits for new records (also one written in two pieces) and stops on Ctrl-C."""
    capture.write_bytes(b"".join(capture.read_bytes().splitlines(keepends=True)[:-1]))  # still open: no end
    env = {**os.environ, "TZ": "UTC"}
    with subprocess.Popen([sys.executable, "-m", "acp_bridge", "show", "--follow", str(capture)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        try:
            for _ in range(5):
                assert proc.stdout.readline()
            extra = dumps(rec(6, 3.0, "to-client", "notification", "pass", method="later", size=3, raw="{}\n"))
            with capture.open("ab") as file:
                file.write(extra[:20])
                file.flush()
                wait_until_read(proc.pid, capture)  # the reader holds the partial record
                file.write(extra[20:])
            assert proc.stdout.readline() == b"22:13:23.000 <- later 3B\n"
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=10) == 0
            assert proc.stderr.read() == b""
        finally:
            if proc.poll() is None:
                proc.kill()


def test_show_follow_waits_for_the_capture_and_stops_at_its_end(tmp_path: Path) -> None:
    """Started before the bridge: --follow says it waits, reads the capture once it appears,
    and exits 0 after the end record."""
    path = tmp_path / "later.jsonl"
    env = {**os.environ, "TZ": "UTC"}
    with subprocess.Popen([sys.executable, "-m", "acp_bridge", "show", "--follow", str(path)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        try:
            assert proc.stderr.readline() == f"acp-bridge: waiting for {path} to appear (Ctrl-C stops)\n".encode()
            header = header_record(wall=WALL, mono=0.0, argv=["acp-bridge", "run"], config_digest="abc", pid=7)
            with path.open("wb") as file:
                file.write(dumps(header) + b"".join(dumps(r) for r in RECORDS[:2]))
                file.flush()
                assert proc.stdout.readline() == b"22:13:20.000 -> session/prompt id 1 (s1) 91B->118B [rewrite: system-prompt]\n"
                file.write(dumps({"type": "end", "time": WALL + 3, "mono": 3.0, "records": 2}))
            assert proc.wait(timeout=10) == 0
            assert proc.stdout.read() == b"22:13:20.500 <- session/update agent_message_chunk (s1) 121B\n"
            assert proc.stderr.read() == b""
        finally:
            if proc.poll() is None:
                proc.kill()


def test_show_without_follow_still_needs_the_capture(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["show", str(tmp_path / "none.jsonl")])
    assert result.exit_code == 2 and "does not exist" in result.stderr


def wait_until_read(pid: int, path: Path) -> None:
    """Wait until process `pid` has read `path` to its current end (Linux: /proc fdinfo)."""
    size = path.stat().st_size
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                if Path(os.readlink(fd)) != path.resolve():
                    continue
                info = Path(f"/proc/{pid}/fdinfo/{fd.name}").read_text()
            except OSError:
                continue
            if int(info.split("pos:", 1)[1].split()[0]) >= size:
                return
        time.sleep(0.01)  # polling a condition, under the deadline above
    raise AssertionError(f"{pid} never read {path} to {size} bytes")


def test_records_are_json(capture: Path) -> None:
    assert all(orjson.loads(line) for line in capture.read_bytes().splitlines())


@pytest.mark.detail
def test_capture_tools_start_without_trio() -> None:
    """Reading a capture needs neither trio nor the relay: they cost ~100 ms of start-up."""
    code = ("import sys\nfrom acp_bridge.commands import main\n"
            "try:\n    main(['show', '--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('trio', 'acp_bridge.shell.agent', 'tomllib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True).stdout
    assert out.splitlines()[-1] == b"[]"
