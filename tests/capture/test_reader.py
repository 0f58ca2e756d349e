"""The one capture reader: its policy for what is no record (docs/capture-format.md,
"Reading a capture"), table-driven, then hostile files through the CLI of every command that
reads a capture: each is refused or read in bounded memory, and none hangs. The refusals are
asked in this process (a FIFO with a writer on call should a command wait for one); what only
a process can show, its peak memory and that it ends at all on /dev/zero, through the real CLI."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from acp_bridge.capture.files import open_capture, read_lines
from acp_bridge.capture.reader import CaptureReader, Line, UnreadableCapture, load_record, split_lines
from acp_bridge.commands import main
from tests.cli_helpers import peer_on_call
from tests.conftest import invoke
from tests.peak_memory import run

HEADER = b'{"type":"header","format":1,"mono":0}\n'
MESSAGE = b'{"type":"message","seq":1,"direction":"to-agent","kind":"request","method":"initialize","id":0}\n'
END = b'{"type":"end","records":1}\n'
LIMIT = 200  # the longest line these cases read as a record
PATH = "c.jsonl"


@dataclass(frozen=True)
class Read:
    """What a reader gave: the types of the records, and what it says after."""

    types: list[str]
    notes: list[str]


def refused(line: int | None, problem: str) -> UnreadableCapture:
    return UnreadableCapture(PATH, line, problem)


TORN_NOTE = "c.jsonl:3: the torn last line (the bridge was killed while writing it) was ignored"

# (data, what a strict reader does, what a lenient one does)
POLICY = [
    pytest.param(HEADER + MESSAGE + END, Read(["header", "message", "end"], []),
                 Read(["header", "message", "end"], []), id="valid"),
    pytest.param(b"\n" + HEADER + b"\n" + MESSAGE + END, Read(["header", "message", "end"], []),
                 Read(["header", "message", "end"], []), id="blank-lines"),
    pytest.param(HEADER + MESSAGE + MESSAGE[:30], Read(["header", "message"], [TORN_NOTE]),
                 Read(["header", "message"], [TORN_NOTE]), id="torn-last-line"),
    pytest.param(HEADER + MESSAGE + MESSAGE[:-1], Read(["header", "message", "message"], []),
                 Read(["header", "message", "message"], []), id="whole-last-record-without-newline"),
    pytest.param(HEADER + b"oops\n" + MESSAGE + END, refused(2, "not a capture record"),
                 Read(["header", "message", "end"],
                      ["c.jsonl: 1 line(s) that are not capture records were skipped (the first at line 2)"]),
                 id="malformed-middle-line"),
    pytest.param(HEADER + END + MESSAGE[:30], refused(3, "not a capture record"),
                 Read(["header", "end"],
                      ["c.jsonl: 1 line(s) that are not capture records were skipped (the first at line 3)"]),
                 id="torn-after-the-end-record"),
    pytest.param(HEADER + b'{"type":"message","pad":"' + b"x" * LIMIT + b'"}\n' + END,
                 refused(2, "a line longer than 200 bytes, so not a capture record"),
                 Read(["header", "end"],
                      ["c.jsonl: 1 line(s) that are not capture records were skipped (the first at line 2)"]),
                 id="over-limit-line"),
    pytest.param(b'{"type":"header","format":2}\n' + MESSAGE,
                 refused(1, "capture format 2; this acp-bridge reads format 1"),
                 refused(1, "capture format 2; this acp-bridge reads format 1"), id="unknown-version"),
    pytest.param(b'{"type":"header","format":{"major":1}}\n',
                 refused(1, "capture format dict; this acp-bridge reads format 1"),
                 refused(1, "capture format dict; this acp-bridge reads format 1"), id="odd-version"),
    pytest.param(MESSAGE + END, refused(1, "not a capture (the first line is not a header record)"),
                 refused(1, "not a capture (the first line is not a header record)"), id="no-header"),
    pytest.param(b"root:x:0:0:root:/root:/bin/bash\n",
                 refused(1, "not a capture (the first line is not a header record)"),
                 refused(1, "not a capture (the first line is not a header record)"), id="not-a-capture"),
    pytest.param(HEADER[:12], refused(1, "not a capture (the first line is not a header record)"),
                 refused(1, "not a capture (the first line is not a header record)"), id="torn-header"),
    pytest.param(b"", refused(None, "empty, not a capture"), refused(None, "empty, not a capture"), id="empty"),
    pytest.param(b"\n\n", refused(None, "empty, not a capture"), refused(None, "empty, not a capture"),
                 id="only-blank-lines"),
]


def read(lines: Iterable[Line], *, strict: bool = True) -> Read | UnreadableCapture:
    try:
        reader = CaptureReader(PATH, lines, strict=strict)
        types = [str(record["type"]) for record in reader]
    except UnreadableCapture as exc:
        return exc
    return Read(types, reader.notes())


def from_file(data: bytes) -> Iterator[Line]:
    return read_lines(io.BytesIO(data), max_line=LIMIT)


def outcome(result: Read | UnreadableCapture) -> object:
    if isinstance(result, UnreadableCapture):
        return (str(result), result.line, result.problem)
    return result


@pytest.mark.parametrize(("data", "strict", "lenient"), POLICY)
def test_the_policy(data: bytes, strict: Read | UnreadableCapture, lenient: Read | UnreadableCapture) -> None:
    """The strict reader (check, replay) and the lenient one (show, stats, export), each case
    from a file's lines; in memory (`split_lines`) the same, but for the limit, which is
    the file reader's."""
    assert outcome(read(from_file(data), strict=True)) == outcome(strict)
    assert outcome(read(from_file(data), strict=False)) == outcome(lenient)
    if b"x" * LIMIT not in data:
        assert outcome(read(split_lines(data))) == outcome(strict)


def test_a_field_of_the_wrong_type_is_read_as_absent() -> None:
    data = HEADER + b'{"type":"message","direction":"to-agent","method":{"a":1},"session":[1],"seq":2}\n'
    records = list(CaptureReader(PATH, split_lines(data)))
    assert records[1] == {"type": "message", "direction": "to-agent", "seq": 2}


@pytest.mark.parametrize(("fields", "kept"), [
    pytest.param(b'"rules":[],"redacted":"whole"', {"rules": [], "redacted": "whole"}, id="usual"),
    pytest.param(b'"rules":["a"],"redacted":["/p"]', {"rules": ["a"], "redacted": ["/p"]}, id="lists-of-strings"),
    pytest.param(b'"rules":["a",1],"redacted":[]', {"redacted": []}, id="a-rule-not-a-string"),
    pytest.param(b'"rules":"a","redacted":[null]', {}, id="rules-not-a-list-a-pointer-not-a-string"),
    pytest.param(b'"redacted":"all"', {}, id="redacted-text-other-than-whole"),
    pytest.param(b'"redacted":""', {}, id="redacted-empty-text"),
    pytest.param(b'"redacted":null,"rules":null', {}, id="nulls"),
    pytest.param(b'"redacted":false,"rules":{}', {}, id="falsy-other-types"),
])
def test_the_two_lists_must_hold_strings(fields: bytes, kept: dict[str, object]) -> None:
    """`rules` and `redacted` (or the text "whole") are dropped when they are not what they say."""
    assert load_record(b'{"type":"message",' + fields + b"}") == {"type": "message", **kept}


def test_load_record_rejects_non_records() -> None:
    assert load_record(b"[1]") is None and load_record(b"{oops") is None and load_record(b'{"a":1}') is None
    assert load_record(b'{"type":"end"}') == {"type": "end"}


def test_a_reader_is_iterated_once() -> None:
    reader = CaptureReader(PATH, split_lines(HEADER + END))
    assert len(list(reader)) == 2
    with pytest.raises(RuntimeError):
        list(reader)


def test_only_a_regular_file_is_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, problem in [(fifo, "not a regular file, so not a capture"),
                          (Path("/dev/zero"), "not a regular file, so not a capture"),
                          (tmp_path, "is a directory, not a capture"),
                          (tmp_path / "none", "cannot read: No such file or directory")]:
        with pytest.raises(UnreadableCapture) as caught, open_capture(str(path)):
            pass
        assert (caught.value.line, caught.value.problem) == (None, problem)


# -- hostile files through the real CLI ------------------------------------------------------

COMMANDS = {
    "show": ["show"],
    "stats": ["stats"],
    "export-html": ["export", "--html", "{out}"],
    "export-otlp": ["export", "--otlp"],
    "check": ["check"],
    "replay": ["replay"],
}


def argv(command: str, capture: Path, tmp_path: Path) -> list[str]:
    args = [arg.format(out=tmp_path / "page.html") for arg in COMMANDS[command]]
    return [*args[:1], str(capture), *args[1:]]


def refusal(path: Path) -> tuple[int, str, str]:
    return (2, "", f"acp-bridge: {path}: not a regular file, so not a capture\n")


@pytest.mark.parametrize(("command", "kind"), [("show", "fifo"), ("stats", "device")])
def test_a_fifo_or_a_device_is_refused_at_once(tmp_path: Path, command: str, kind: str) -> None:
    """A FIFO without a writer would block the open (`show` hung on one), and /dev/zero has
    no line end (`stats` grew past 3 GiB on it): one line, exit 2, nothing read; a real
    process, so that a hang or a growth fails the test, not the suite."""
    path = Path("/dev/zero")
    if kind == "fifo":
        path = tmp_path / "fifo.jsonl"
        os.mkfifo(path)
    ran = run(argv(command, path, tmp_path), tmp_path)
    assert (ran.status, ran.stdout, ran.stderr) == refusal(path)
    assert ran.peak_mib < 100, ran.peak_mib


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_every_command_refuses_a_fifo_or_a_device(tmp_path: Path, command: str, kind: str) -> None:
    """Each command reads through the one reader, which refuses what is no regular file
    before reading: asked in this process, of a FIFO (with a writer on call: `peer_on_call`) and
    of /dev/null (a device like /dev/zero, but one that ends)."""
    path = Path("/dev/null")
    if kind == "fifo":
        path = tmp_path / "fifo.jsonl"
        os.mkfifo(path)
    with peer_on_call(path, writer=True):
        result = CliRunner().invoke(main, argv(command, path, tmp_path))
    assert (result.exit_code, result.stdout, result.stderr) == refusal(path)
    assert not (tmp_path / "page.html").exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_a_file_that_is_no_capture_is_refused(tmp_path: Path, command: str) -> None:
    """`stats /etc/passwd` said nothing was wrong and exited 0."""
    path = tmp_path / "passwd"
    path.write_bytes(b"root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n")
    result = CliRunner().invoke(main, argv(command, path, tmp_path))
    assert (result.exit_code, result.stdout, result.stderr) == (
        2, "", f"acp-bridge: {path}:1: not a capture (the first line is not a header record)\n")


BIG = 300 << 20  # a line with no record in it, past the reader's 256 MiB


@pytest.fixture(scope="module")
def huge_line(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A capture with a 300 MiB line of NULs in the middle; sparse, so made at once."""
    path = tmp_path_factory.mktemp("huge") / "huge.jsonl"
    with path.open("wb") as file:
        file.write(HEADER)
        file.seek(len(HEADER) + BIG)
        file.write(b"\n" + MESSAGE + END)
    return path


@pytest.mark.parametrize("command", ["show", "stats", "export-html", "check", "replay"])
def test_a_huge_line_that_is_no_record_is_refused_unread(huge_line: Path, tmp_path: Path, command: str) -> None:
    """It is scanned for its end and never held: the process stays far below the line's size
    (it took show, stats, check and export to about 900 MiB); then, as any line that is no
    record, it is unreadable input for every command."""
    ran = run(argv(command, huge_line, tmp_path), tmp_path)
    assert (ran.status, ran.stderr) == (2, f"acp-bridge: {huge_line}:2: a line longer than 256 MiB, so not a capture record\n")
    assert ran.peak_mib < 100, ran.peak_mib


RECORD = 16 << 20
_WORDS = "word " * (RECORD // 5)  # text as an agent writes it: many words


def _long_record(shape: str) -> bytes:
    """A capture record of about RECORD bytes: a line that is not JSON-RPC, or a message
    whose text is the whole line (an agent's chunk, a prompt), which the export previews."""
    if shape == "not-json-rpc":
        return b'{"type":"message","seq":1,"direction":"to-agent","kind":"other","verdict":"other","raw":"' + \
            b"x" * RECORD + b'"}\n'
    msg: dict[str, object]
    if shape == "chunk":
        msg = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": {
            "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": _WORDS}}}}
        fields: dict[str, object] = {"direction": "to-client", "kind": "notification", "method": "session/update"}
    else:
        msg = {"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {"sessionId": "s1", "prompt": [
            {"type": "text", "text": _WORDS}]}}
        fields = {"direction": "to-agent", "kind": "request", "method": "session/prompt", "id": 1}
    raw = orjson.dumps(msg).decode() + "\n"
    return orjson.dumps({"type": "message", "seq": 1, "time": 1.0, "mono": 0.0, "verdict": "pass", "session": "s1",
                         "rules": [], "size": len(raw), "raw": raw, **fields}) + b"\n"


@pytest.mark.parametrize("shape", ["not-json-rpc", "chunk", "prompt"])
@pytest.mark.parametrize("command", ["show", "stats", "export-html", "check"])
def test_memory_stays_a_small_multiple_of_the_longest_record(tmp_path: Path, command: str, shape: str) -> None:
    """A 16 MiB record (the default parse limit): read whole once, never re-joined, its
    text previewed and cut without a copy per word (one 15 MB record took `export` to
    124 MiB, and one 15 MB chunk of words to 322 MiB). The interpreter and the package
    take about 25 MiB; the line, the record and the message parsed from it, 16 MiB each."""
    path = tmp_path / "long.jsonl"
    path.write_bytes(HEADER + _long_record(shape) + END)
    ran = run(argv(command, path, tmp_path), tmp_path)
    assert ran.status in (0, 1), ran.stderr  # check: a request without its answer is a finding
    assert ran.peak_mib < 40 + 3 * (RECORD >> 20), ran.peak_mib


def test_unanswered_requests_are_not_held_whole(tmp_path: Path) -> None:
    """`stats` lists the requests left unanswered: it kept each whole, `raw` and all, so
    twelve 4 MiB prompts never answered (an agent that died on them) took it to 95 MiB and a
    hundred such to a gigabyte. It keeps what it prints of one: memory stays that of the
    longest record."""
    size = 4 << 20
    records = b"".join(
        orjson.dumps({"type": "message", "seq": seq, "time": 1.0, "mono": 0.0, "direction": "to-agent",
                      "kind": "request", "verdict": "pass", "method": "session/prompt", "id": seq,
                      "session": "s1", "rules": [], "size": size, "raw": "x" * size}) + b"\n"
        for seq in range(1, 13))
    path = tmp_path / "unanswered.jsonl"
    path.write_bytes(HEADER + records + END)
    ran = run(argv("stats", path, tmp_path), tmp_path)
    assert ran.status == 0, ran.stderr
    assert ran.stdout.endswith("unanswered requests: 12\n" + "".join(
        f"  00:00:01.000 -> session/prompt id {seq} (s1)\n" for seq in range(1, 13))), ran.stdout
    assert ran.peak_mib < 40 + 3 * (size >> 20), ran.peak_mib


# -- one policy, every command ---------------------------------------------------------------

_INIT = (b'{"type":"message","seq":1,"time":1,"mono":0,"direction":"to-agent","kind":"request",'
         b'"verdict":"pass","method":"initialize","id":0,"rules":[],"raw":"{\\"jsonrpc\\":\\"2.0\\",'
         b'\\"id\\":0,\\"method\\":\\"initialize\\",\\"params\\":{\\"protocolVersion\\":1}}\\n"}\n')
_ANSWER = (b'{"type":"message","seq":2,"time":1.1,"mono":0.1,"direction":"to-client","kind":"response",'
           b'"verdict":"pass","method":"initialize","id":0,"rules":[],"latency":0.1,"raw":"{\\"jsonrpc\\":'
           b'\\"2.0\\",\\"id\\":0,\\"result\\":{\\"protocolVersion\\":1}}\\n"}\n')
_CLEAN = HEADER + _INIT + _ANSWER + END  # no findings, nothing to differ, nothing to serve

# Every command that reads a capture, as its argv with {capture}; `drive` reads the recording
# before it starts the agent (here one that would exit at once), so it is asked only of files
# it refuses.
READERS = {
    "show": ["show", "{capture}"],
    "stats": ["stats", "{capture}"],
    "export-html": ["export", "{capture}", "--html", "{page}"],
    "check": ["check", "{capture}"],
    "replay-rules": ["replay", "{capture}", "--rules"],
    "replay-serving": ["replay", "{capture}"],
    "diff": ["diff", "{capture}", "{clean}"],
    "drive": ["drive", "{capture}", "--", sys.executable, "-c", "pass"],
}

# (the file, the line said on stderr ({path}: the file), or None: read, with its status 0)
BAD_FILES = [
    pytest.param(HEADER + _INIT + b"oops\n" + _ANSWER + END, "{path}:3: not a capture record",
                 id="not-json-mid-file"),
    pytest.param(HEADER + _INIT + b'{"seq":2}\n' + _ANSWER + END, "{path}:3: not a capture record",
                 id="json-but-no-record"),
    pytest.param(HEADER + _INIT + b"[1, 2]\n" + _ANSWER + END, "{path}:3: not a capture record",
                 id="json-array"),
    pytest.param(HEADER + _INIT + _ANSWER + END + _INIT[:30], "{path}:5: not a capture record",
                 id="torn-after-the-end-record"),
    pytest.param(b"", "{path}: empty, not a capture", id="empty"),
    pytest.param(_INIT + _ANSWER + END, "{path}:1: not a capture (the first line is not a header record)",
                 id="no-header"),
    pytest.param(HEADER + _INIT + _ANSWER + _INIT[:30], None, id="torn-last-line"),
]
TORN = "{path}:4: the torn last line (the bridge was killed while writing it) was ignored"


# drive would go on to play a torn file to its agent: it is asked only of the files it refuses.
POLICY_CASES = [pytest.param(command, *bad.values, id=f"{bad.id}-{command}")
                for bad in BAD_FILES for command in READERS if bad.values[1] is not None or command != "drive"]


@pytest.mark.parametrize(("command", "data", "refusal"), POLICY_CASES)
def test_every_command_reads_a_bad_file_by_one_policy(tmp_path: Path, command: str, data: bytes,
                                                      refusal: str | None) -> None:
    """A line that is no record, anywhere but torn at the end of a capture the bridge did not
    close, is unreadable input for every command: one line naming file and line, exit 2,
    nothing written (`show` skipped it and exited 1, `stats` and `export` exited 0, `check`
    and `replay` 2). A torn last line is read past by all, with the same note."""
    path, page, clean = tmp_path / "c.jsonl", tmp_path / "page.html", tmp_path / "clean.jsonl"
    path.write_bytes(data)
    clean.write_bytes(_CLEAN)
    args = [arg.format(capture=path, page=page, clean=clean) for arg in READERS[command]]
    result = invoke(args)
    said = result.stderr.decode().splitlines()
    if refusal is not None:
        assert (result.returncode, said) == (2, [f"acp-bridge: {refusal.format(path=path)}"])
        assert not page.exists()
    else:
        assert result.returncode == 0, said
        assert said.count(f"acp-bridge: {TORN.format(path=path)}") == 1, said
        assert page.exists() == (command == "export-html")


@pytest.mark.parametrize(("fields", "kept"), [
    pytest.param(b'"size":0,"out_size":0,"latency":0', {"size": 0, "out_size": 0, "latency": 0}, id="zero"),
    pytest.param(b'"size":-1,"out_size":-2', {}, id="negative-sizes"),
    pytest.param(b'"latency":-0.001', {}, id="negative-latency"),
    pytest.param(b'"latency":31622400', {"latency": 31622400}, id="a-year"),
    pytest.param(b'"latency":31622400.5', {}, id="beyond-a-year"),
    pytest.param(b'"latency":1' + b"0" * 299, {}, id="300-digits"),
    pytest.param(b'"latency":"1.5"', {}, id="a-string"),
])
def test_numbers_out_of_range_are_read_as_absent(fields: bytes, kept: dict[str, object]) -> None:
    """A size below 0 or a latency no bridge measured (below 0, beyond a year) is read as
    unknown, as a field of the wrong type is; the reader counts the records for its note."""
    reader = CaptureReader(PATH, split_lines(HEADER + b'{"type":"message",' + fields + b"}\n"))
    assert list(reader)[1] == {"type": "message", **kept}
    dropped = fields.count(b":") - len(kept)
    assert (reader.odd, len(reader.notes())) == ((1, 1) if dropped else (0, 0))
