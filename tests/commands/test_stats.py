"""`acp-bridge stats` on a small fixed capture: exact output lines."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from acp_bridge.capture.stats import CaptureStats
from acp_bridge.commands import main
from acp_bridge.commands.stats import ROWS_PER_WRITE
from tests.commands.sample_capture import WALL, invoke


def test_stats(capture: Path, utc: None) -> None:
    assert invoke("stats", str(capture)) == [
        "capture: format 1, bridge 0.1.0, started 2023-11-14T22:13:20Z, config abc",
        "messages: 5 (286 bytes), malformed lines: 1, over the parse limit: 0, redacted: 0",
        "",
        "method                               direction   count      bytes",
        "(not JSON-RPC)                       to-client       1          4",
        "session/cancel                       to-agent        1         10",
        "session/prompt                       to-agent        1         91",
        "session/prompt                       to-client       1         60",
        "session/update                       to-client       1        121",
        "",
        "latency                                count       p50       p90       p99       max",
        "session/prompt                             1     1.25s     1.25s     1.25s     1.25s",
        "",
        "rule                                 verdict     count",
        "system-prompt                        rewrite         1",
        "",
        "unanswered requests: 1",
        "  22:13:22.000 -> session/cancel id 2 (s2)",
    ]


def test_stats_json_holds_the_same_figures(capture: Path) -> None:
    """`stats --json`: what the text prints, as JSON (the inspector and the MCP server serve
    this object), latencies in seconds, values as recorded."""
    result = CliRunner().invoke(main, ["stats", str(capture), "--json"])
    assert result.exit_code == 0, result.output
    assert orjson.loads(result.stdout) == {
        "header": {"format": 1, "bridge": "0.1.0", "started": "2023-11-14T22:13:20Z", "config": "abc"},
        "messages": 5, "bytes": 286, "malformed": 1, "opaque": 0, "redacted": 0, "ended": True, "unreadable": 0,
        "by_method": [
            {"method": "(not JSON-RPC)", "direction": "to-client", "count": 1, "bytes": 4},
            {"method": "session/cancel", "direction": "to-agent", "count": 1, "bytes": 10},
            {"method": "session/prompt", "direction": "to-agent", "count": 1, "bytes": 91},
            {"method": "session/prompt", "direction": "to-client", "count": 1, "bytes": 60},
            {"method": "session/update", "direction": "to-client", "count": 1, "bytes": 121},
        ],
        "latency": [{"method": "session/prompt", "count": 1, "p50": 1.25, "p90": 1.25, "p99": 1.25, "max": 1.25}],
        "rules": [{"rule": "system-prompt", "verdict": "rewrite", "count": 1}],
        "unanswered": [{"seq": 5, "time": WALL + 2.0, "direction": "to-agent", "method": "session/cancel",
                        "id": 2, "session": "s2"}],
    }


def test_the_text_lists_the_first_unanswered_requests_and_counts_the_rest(tmp_path: Path) -> None:
    """A capture of many requests never answered listed every one, a line each; --json
    keeps them all."""
    from acp_bridge.capture.records import dumps
    from acp_bridge.capture.stats import UNANSWERED_SHOWN
    from tests.commands.sample_capture import HEADER, rec

    count = UNANSWERED_SHOWN + 3
    capture = tmp_path / "many.jsonl"
    capture.write_bytes(b"".join([HEADER, *(
        dumps(rec(n, n / 10, "to-agent", "request", "pass", method="session/prompt", id=n, session="s", size=2,
                  raw="{}\n")) for n in range(1, count + 1))]))
    lines = invoke("stats", str(capture))
    at = lines.index(f"unanswered requests: {count}")
    assert [line.split()[-3:] for line in lines[at + 1:at + 3]] == [["id", "1", "(s)"], ["id", "2", "(s)"]]
    assert lines[at + 1 + UNANSWERED_SHOWN:] == ["  … and 3 more (stats --json lists them all)"]
    listed = orjson.loads(CliRunner().invoke(main, ["stats", str(capture), "--json"]).stdout)["unanswered"]
    assert [r["seq"] for r in listed] == list(range(1, count + 1))


# -- values a capture edited by hand may hold ------------------------------------------------

def odd_capture(path: Path) -> Path:
    """A capture whose records say a negative size, a 300-digit latency, a latency that is a
    string, a negative latency and out_size, and a size too big for an integer (a float)."""
    from acp_bridge.capture.records import dumps
    from tests.commands.sample_capture import HEADER, REQ, RESP, rec

    digits = b"1" + b"0" * 299
    path.write_bytes(b"".join([
        HEADER,
        dumps(rec(1, 0.0, "to-agent", "request", "pass", method="session/prompt", id=1, size=-5, raw=REQ)),
        dumps(rec(2, 1.0, "to-client", "response", "pass", method="session/prompt", id=1, size=60, latency=7,
                  raw=RESP)).replace(b'"latency":7', b'"latency":' + digits),
        dumps(rec(3, 2.0, "to-agent", "request", "pass", method="session/load", id=2, size=3, raw=REQ)),
        dumps(rec(4, 2.5, "to-client", "response", "pass", method="session/load", id=2, size=3, latency="fast",
                  raw=RESP)),
        dumps(rec(5, 3.0, "to-client", "response", "pass", method="x", id=9, size=3, latency=-2.5, out_size=-1,
                  out="{}")),
        dumps(rec(6, 3.0, "to-client", "notification", "pass", method="x", size=7, raw=RESP)).replace(
            b'"size":7', b'"size":' + digits),
    ]))
    return path


ODD_NOTE = ("acp-bridge: {}: 5 record(s) hold values of the wrong type or out of range, read as unknown "
            "(latency, out_size, size; the first at line 2)\n")


def test_stats_reads_values_out_of_range_as_unknown_and_says_so_once(tmp_path: Path, utc: None) -> None:
    """A negative size was summed (-5 bytes), a 300-digit latency printed with all its digits
    and a negative one as -2500.0ms. Each is read as absent, and said once: a latency then
    comes from the records' clocks, as for a capture that has none."""
    capture = odd_capture(tmp_path / "odd.jsonl")
    result = CliRunner().invoke(main, ["stats", str(capture)])
    assert (result.exit_code, result.stderr) == (0, ODD_NOTE.format(capture))
    assert result.stdout.splitlines() == [
        "capture: format 1, bridge 0.1.0, started 2023-11-14T22:13:20Z, config abc",
        "messages: 6 (69 bytes), malformed lines: 0, over the parse limit: 0, redacted: 0, capture not closed cleanly",
        "",
        "method                               direction   count      bytes",
        "session/load                         to-agent        1          3",
        "session/load                         to-client       1          3",
        "session/prompt                       to-agent        1          0",
        "session/prompt                       to-client       1         60",
        "x                                    to-client       2          3",
        "",
        "latency                                count       p50       p90       p99       max",
        "session/load                               1   500.0ms   500.0ms   500.0ms   500.0ms",
        "session/prompt                             1     1.00s     1.00s     1.00s     1.00s",
        "",
        "rule                                 verdict     count",
        "(no rule changed anything)",
        "",
        "unanswered requests: 0",
    ]
    as_json = CliRunner().invoke(main, ["stats", str(capture), "--json"])
    assert as_json.stderr == ODD_NOTE.format(capture)
    figures = orjson.loads(as_json.stdout)
    assert (figures["bytes"], figures["latency"]) == (69, [
        {"method": "session/load", "count": 1, "p50": 0.5, "p90": 0.5, "p99": 0.5, "max": 0.5},
        {"method": "session/prompt", "count": 1, "p50": 1.0, "p90": 1.0, "p99": 1.0, "max": 1.0}])


def test_show_prints_an_unknown_size_as_a_question_mark_and_no_odd_latency(tmp_path: Path, utc: None) -> None:
    capture = odd_capture(tmp_path / "odd.jsonl")
    result = CliRunner().invoke(main, ["show", str(capture)])
    assert (result.exit_code, result.stderr) == (0, ODD_NOTE.format(capture))
    assert result.stdout.splitlines() == [
        "22:13:20.000 -> session/prompt id 1 ?B",
        "22:13:21.000 <- session/prompt id 1 ok 60B",
        "22:13:22.000 -> session/load id 2 3B",
        "22:13:22.500 <- session/load id 2 ok 3B",
        "22:13:23.000 <- x id 9 ok 3B",
        "22:13:23.000 <- x ?B",
    ]


# -- what is kept of a request until its answer -----------------------------------------------

HUNDRED_DIGITS, OTHER_HUNDRED = "1" * 100, "2" * 100


def _message(seq: object, direction: str, kind: str, method: str, id_: str, session: str = "null",
             time: str | None = "1700000000.5", mono: str | None = "0.5") -> bytes:
    """A request or response record as a capture line, its values written as given (JSON)."""
    fields = [] if seq is None else [f'"seq":{seq}']
    fields += [] if time is None else [f'"time":{time}']
    fields += [] if mono is None else [f'"mono":{mono}']
    return ('{"type":"message",' + ",".join([*fields, f'"direction":"{direction}"', f'"kind":"{kind}"',
            '"verdict":"pass"', f'"method":{method}', f'"id":{id_}', f'"session":{session}', '"rules":[]',
            '"size":2']) + "}\n").encode()


MIXED = [
    _message(1, "to-agent", "request", '"initialize"', "1"),
    _message(2, "to-client", "response", "null", "1", mono="0.75"),  # answers seq 1
    _message(3, "to-agent", "request", '"session/new"', '"1"'),  # "1" is not 1
    _message(4, "to-client", "request", '"fs/read_text_file"', "1", '"s1"'),  # the agent's own 1
    _message(5, "to-agent", "request", '"session/prompt"', "7", '"s1"', mono="1.0"),
    _message(6, "to-agent", "request", '"session/prompt"', "7", '"s1"', mono="1.5"),  # the same id again
    _message(7, "to-client", "response", '"session/prompt"', "7", '"s1"', mono="3.0"),  # answers seq 5
    _message(8, "to-agent", "request", '"session/prompt"', HUNDRED_DIGITS, '"s2"'),
    _message(9, "to-agent", "request", '"session/load"', OTHER_HUNDRED, '"s2"', mono="2.0"),
    _message(10, "to-client", "response", "null", OTHER_HUNDRED, mono="2.125"),  # answers seq 9
    _message(11, "to-client", "request", '"odd\\u001bmethod"', '"x\\u0007"', "12"),  # a session that is a number
    _message(12, "to-agent", "request", '"session/cancel"', "3", time="1700000012", mono=None),  # an int time, no mono
    _message(13, "to-agent", "request", '"m"', "true"),
    _message(14, "to-agent", "request", '"m"', "2.5"),
    _message(15, "to-agent", "request", '"m"', '{"b":1,"a":[2]}'),
    _message(16, "to-agent", "request", '"' + "m" * 300 + '"', "5"),
    _message(0, "to-agent", "request", '"m"', "6"),  # out of order
    _message(None, "to-agent", "request", '"no seq"', "8"),
    _message(-5, "to-agent", "request", '"m"', "9223372036854775807"),
    _message(17, "to-agent", "request", '"m"', "9223372036854775808"),
    _message(18, "to-client", "request", '"session/request_permission"', "2", '"s1"'),
    _message(19, "to-agent", "response", "null", "2", mono="4.0"),  # the client answers seq 18
    _message(20, "to-agent", "request", "null", "10", '"s3"'),
    _message(21, "to-client", "response", "null", '"1"', mono="5.0"),  # answers seq 3
    _message(22, "to-agent", "request", '"session/prompt"', "7", '"s1"'),  # behind seq 6
]


def test_json_writes_an_unanswered_id_past_64_bits_with_all_its_digits(tmp_path: Path) -> None:
    """orjson writes no integer past 64 bits: `stats --json` ended in a traceback (exit 1) on
    a capture whose unanswered request had a 100-digit id. It is written as the capture holds it."""
    import json

    from tests.commands.sample_capture import HEADER

    capture = tmp_path / "big-id.jsonl"
    capture.write_bytes(HEADER + _message(1, "to-agent", "request", '"session/prompt"', HUNDRED_DIGITS, '"s"'))
    result = CliRunner().invoke(main, ["stats", str(capture), "--json"])
    assert (result.exit_code, result.stderr) == (0, "")
    assert json.loads(result.stdout)["unanswered"] == [{"seq": 1, "time": 1700000000.5, "direction": "to-agent",
                                                         "method": "session/prompt", "id": int(HUNDRED_DIGITS),
                                                         "session": "s"}]


def _row(seq: object, direction: str, method: object, id_: object, session: object = None,
         time: object = 1700000000.5) -> dict[str, object]:
    return {"seq": seq, "time": time, "direction": direction, "method": method, "id": id_, "session": session}


def test_the_unanswered_requests_are_listed_as_the_capture_holds_them(tmp_path: Path, utc: None) -> None:
    """What `stats` keeps of a request in flight is packed now (it kept a dict of each: 880 MB
    for a million); the lists are those it printed before, line for line: "1" is not 1, each
    side numbers its own, a second request with an id in flight waits behind the first, an id
    of 100 digits, past 64 bits, a bool, a float or an object is kept as written, a time
    written as an integer stays one, a request without a seq sorts as 0."""
    import json

    from tests.commands.sample_capture import HEADER

    capture = tmp_path / "mixed.jsonl"
    capture.write_bytes(HEADER + b"".join(MIXED))
    lines = invoke("stats", str(capture))
    at = lines.index("unanswered requests: 15")
    assert lines[at + 1:] == [
        "  22:13:20.500 -> m id 9223372036854775807",
        "  22:13:20.500 -> m id 6",
        "  22:13:20.500 -> no seq id 8",
        "  22:13:20.500 <- fs/read_text_file id 1 (s1)",
        "  22:13:20.500 -> session/prompt id 7 (s1)",
        f"  22:13:20.500 -> session/prompt id {HUNDRED_DIGITS} (s2)",
        '  22:13:20.500 <- odd\\u001bmethod id "x\\u0007" (12)',
        "  22:13:32.000 -> session/cancel id 3",
        "  22:13:20.500 -> m id true",
        "  22:13:20.500 -> m id 2.5",
        '  22:13:20.500 -> m id {"b":1,"a":[2]}',
        f"  22:13:20.500 -> {'m' * 300} id 5",
        "  22:13:20.500 -> m id 9223372036854775808",
        "  22:13:20.500 -> None id 10 (s3)",
        "  22:13:20.500 -> session/prompt id 7 (s1)",
    ]
    assert lines[at - 10:at - 4] == [  # each answer paired with its own request
        "latency                                count       p50       p90       p99       max",
        "initialize                                 1   250.0ms   250.0ms   250.0ms   250.0ms",
        "session/load                               1   125.0ms   125.0ms   125.0ms   125.0ms",
        "session/new                                1     4.50s     4.50s     4.50s     4.50s",
        "session/prompt                             1     2.00s     2.00s     2.00s     2.00s",
        "session/request_permission                 1     3.50s     3.50s     3.50s     3.50s",
    ]
    result = CliRunner().invoke(main, ["stats", str(capture), "--json"])
    assert (result.exit_code, result.stderr) == (0, "")
    assert json.loads(result.stdout)["unanswered"] == [
        _row(-5, "to-agent", "m", 9223372036854775807),
        _row(0, "to-agent", "m", 6),
        _row(None, "to-agent", "no seq", 8),
        _row(4, "to-client", "fs/read_text_file", 1, "s1"),
        _row(6, "to-agent", "session/prompt", 7, "s1"),
        _row(8, "to-agent", "session/prompt", int(HUNDRED_DIGITS), "s2"),
        _row(11, "to-client", "odd\x1bmethod", "x\x07", 12),
        _row(12, "to-agent", "session/cancel", 3, time=1700000012),
        _row(13, "to-agent", "m", True),
        _row(14, "to-agent", "m", 2.5),
        _row(15, "to-agent", "m", {"b": 1, "a": [2]}),
        _row(16, "to-agent", "m" * 300, 5),
        _row(17, "to-agent", "m", 9223372036854775808),
        _row(20, "to-agent", None, 10, "s3"),
        _row(22, "to-agent", "session/prompt", 7, "s1"),
    ]
    assert type(json.loads(result.stdout)["unanswered"][7]["time"]) is int


def _never_answered(path: Path, count: int) -> Path:
    from tests.commands.sample_capture import HEADER

    path.write_bytes(HEADER + b"".join(
        b'{"type":"message","seq":%d,"time":%d.5,"mono":%d.25,"direction":"to-agent","kind":"request",'
        b'"verdict":"pass","method":"session/prompt","id":%d,"session":"s1","rules":[],"size":2}\n' % (n, n, n, n)
        for n in range(1, count + 1)))
    return path


def test_a_request_left_unanswered_costs_a_few_hundred_bytes(tmp_path: Path) -> None:
    """`stats` kept a dict of each request in flight: about 800 bytes of a real process's
    peak each, 880 MB for a capture of a million never answered (an agent that died), though
    the text lists 100; `--json` then made a dict more of each and the text of all at once,
    twice (1,250 bytes each). It keeps 44 packed bytes each (with its id and the pairing key,
    about 230 for a million, 375 for 20,000), makes the dicts of the 100 the text lists only,
    and `--json` writes them a thousand at a time: the peak over that of an empty capture,
    per request."""
    from tests.peak_memory import run

    count = 20_000
    empty = run(["stats", str(_never_answered(tmp_path / "empty.jsonl", 0))], tmp_path).peak_mib
    many = _never_answered(tmp_path / "many.jsonl", count)
    text, as_json = run(["stats", str(many)], tmp_path), run(["stats", str(many), "--json"], tmp_path)
    assert (text.status, text.stderr, as_json.status, as_json.stderr) == (0, "", 0, "")
    assert text.stdout.endswith(f"\n  … and {count - 100} more (stats --json lists them all)\n")
    assert [row["id"] for row in orjson.loads(as_json.stdout)["unanswered"]] == list(range(1, count + 1))
    per_request = [(ran.peak_mib - empty) * (1 << 20) / count for ran in (text, as_json)]
    assert max(per_request) < 500, per_request  # 375 each here; 860 and 1,280 before


@pytest.mark.parametrize("count", [0, 1, ROWS_PER_WRITE, ROWS_PER_WRITE + 1])
def test_json_in_pieces_is_the_json_of_the_whole(count: int) -> None:
    """`--json` writes the unanswered requests a thousand at a time: the text is that of
    the whole object, byte for byte (non-ASCII as UTF-8, nested ids indented, an empty list)."""
    from acp_bridge.capture.reader import load_record
    from acp_bridge.commands.captures import dumps_json
    from acp_bridge.commands.stats import json_text

    aggregate = CaptureStats()
    lines = [line for line in MIXED if HUNDRED_DIGITS.encode() not in line and OTHER_HUNDRED.encode() not in line]
    lines += [_message(100 + n, "to-agent", "request", '"café/ünïcode"', str(1000 + n), '"s"')
              for n in range(count)]
    for line in lines if count else []:
        record = load_record(line)
        assert record is not None
        aggregate.add(record)
    assert len(aggregate.unanswered) == (14 + count if count else 0)
    assert "".join(json_text(aggregate)) == dumps_json(aggregate.as_json())
