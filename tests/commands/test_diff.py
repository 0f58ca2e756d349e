"""`acp-bridge diff A B` on the golden captures: exit statuses 0 / 1 / 2, the text and the JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from acp_bridge.commands import main
from tests.replay.drive import GOLDEN

V1 = GOLDEN / "v1-legacy-air-meta.jsonl"
UNLOCK = GOLDEN / "v1-new-client-unlock.jsonl"


def diff(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["diff", *map(str, args)])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("name", ["v1-legacy-air-meta", "v1-new-client-unlock", "v2-resume-spec-dialect"])
def test_a_capture_is_the_same_as_itself(name: str) -> None:
    status, out, _ = diff(GOLDEN / f"{name}.jsonl", GOLDEN / f"{name}.jsonl")
    assert status == 0
    assert out.splitlines()[-1].startswith("same: ")


def test_two_sessions_differ(tmp_path: Path) -> None:
    status, out, _ = diff(V1, UNLOCK)
    lines = out.splitlines()
    assert status == 1
    assert lines[-1] == "A and B differ: 7 missing, 8 extra, 9 changed (12 of 19 and 20 messages aligned)"
    assert "session 1 turn 1: missing from B: A seq 7 <- session/request_permission" in lines
    assert "session 1 turn 2: extra in B: B seq 20 (before A seq 19) -> session/cancel" in lines


def test_json(tmp_path: Path) -> None:
    status, out, _ = diff(V1, UNLOCK, "--json", "--ignore", "/params/update/_meta", "--ignore", "/result")
    report = json.loads(out)
    assert status == 1
    assert (report["a"], report["b"], report["same"]) == (str(V1), str(UNLOCK), False)
    assert report["counts"] == {"missing": 7, "extra": 8, "changed": 6}
    first = report["differences"][0]
    assert first == {"what": "changed", "where": "connection", "session": 0, "turn": 0, "a_seq": 1, "b_seq": 1,
                     "anchor": 1, "direction": "to-agent", "kind": "request", "method": "initialize",
                     "update": None, "pointers": first["pointers"]}
    assert sorted(first["pointers"]) == ["/params/clientCapabilities/_meta", "/params/clientCapabilities/session"]
    assert not any(p.startswith("/result") for d in report["differences"] for p in d.get("pointers", {}))


def test_strict_ids_finds_what_the_default_ignores(tmp_path: Path) -> None:
    renamed = tmp_path / "renamed.jsonl"
    renamed.write_text(V1.read_text().replace("sess_", "other_"))
    assert diff(V1, renamed)[0] == 0
    status, out, _ = diff(V1, renamed, "--strict-ids")
    assert status == 1
    assert 'session 1 setup: A seq 4 / B seq 4 <- response session/new: /result/sessionId "sess_air_1" -> "other_air_1"' in out


@pytest.mark.parametrize(("content", "problem"), [
    (b"", "empty, not a capture"),
    (b"not json\n", "1: not a capture (the first line is not a header record)"),
    (b'{"type":"header","format":1}\nnot a record\n{"type":"end"}\n', "2: not a capture record"),
])
def test_bad_input_is_exit_2(tmp_path: Path, content: bytes, problem: str) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(content)
    status, out, err = diff(V1, bad)
    assert (status, out) == (2, "")
    assert err == f"acp-bridge: {bad}:{problem}\n" if problem[0].isdigit() else f"acp-bridge: {bad}: {problem}\n"


def test_a_bad_pointer_is_exit_2() -> None:
    status, _, err = diff(V1, V1, "--ignore", "params")
    assert status == 2
    assert err == "acp-bridge: --ignore: 'params' is not a JSON pointer (RFC 6901: starts with /)\n"


def test_a_fifo_is_refused(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    status, _, err = diff(V1, fifo)
    assert status == 2 and "fifo" in err
