"""The catalog of captures behind `ui` and `mcp`: what it lists, what it refuses, and its
incremental index of a capture that grows, shrinks or goes away."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import orjson
import pytest

from acp_bridge.capture import catalog as catalog_module
from acp_bridge.capture.catalog import Catalog, UnknownCapture
from acp_bridge.capture.reader import load_record
from acp_bridge.core.protocol import Json


def header(time: float = 100.0, pid: int = 4242) -> bytes:
    return orjson.dumps({"type": "header", "format": 1, "time": time, "mono": 0, "pid": pid}) + b"\n"


def message(seq: int, method: str = "session/prompt", **extra: object) -> bytes:
    record = {"type": "message", "seq": seq, "direction": "to-agent", "kind": "request", "method": method,
              "id": seq, "session": None, "rules": [], "raw": "{}\n", **extra}
    return orjson.dumps(record) + b"\n"


INITIALIZE = (
    message(1, "initialize", raw=orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": 1, "clientInfo": {"name": "zed", "version": "0.200.1"}}}).decode() + "\n")
    + orjson.dumps({"type": "message", "seq": 2, "direction": "to-client", "kind": "response",
                    "method": "initialize", "id": 1, "raw": orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {
                        "protocolVersion": 1, "agentInfo": {"name": "claude-agent-acp", "version": "0.9.0"}}})
                    .decode() + "\n"}) + b"\n")
FINDING = b'{"type":"finding","code":"unanswered","level":"warning","about":1,"count":1}\n'
END = b'{"type":"end","records":2}\n'


def test_lists_captures_newest_first_with_their_peers_counts_and_liveness(tmp_path: Path) -> None:
    (tmp_path / "old.jsonl").write_bytes(header(100.0, pid=1) + INITIALIZE + FINDING + END)
    (tmp_path / "new.jsonl").write_bytes(header(200.0, pid=2) + message(1))
    catalog = Catalog([str(tmp_path)], alive=lambda pid: pid in (1, 2))

    listed = catalog.refresh()

    assert [(c.name, c.started, c.messages, c.findings, c.client, c.agent, catalog.live(c)) for c in listed] == [
        ("new.jsonl", 200.0, 1, 0, None, None, True),
        ("old.jsonl", 100.0, 2, 1, "zed 0.200.1", "claude-agent-acp 0.9.0", False),  # it has its end record
    ]


def test_a_capture_whose_bridge_is_gone_is_not_live(tmp_path: Path) -> None:
    (tmp_path / "c.jsonl").write_bytes(header(pid=7) + message(1))
    catalog = Catalog([str(tmp_path)], alive=lambda pid: False)
    [capture] = catalog.refresh()
    assert not catalog.live(capture)


@pytest.mark.parametrize("content", [
    b"", b"root:x:0:0:root:/root:/bin/bash\n", b'{"type":"header","format":2}\n', b'{"type":"message"}\n',
], ids=["empty", "not-json", "unknown-format", "no-header"])
def test_what_is_no_capture_is_not_listed(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "x.jsonl").write_bytes(content)
    catalog = Catalog([str(tmp_path)])
    assert catalog.refresh() == []
    with pytest.raises(UnknownCapture):
        catalog.get("x.jsonl")


def test_only_jsonl_files_directly_inside_and_links_that_stay_inside(tmp_path: Path) -> None:
    root, outside = tmp_path / "captures", tmp_path / "elsewhere"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "a.jsonl").write_bytes(header())
    (root / "notes.txt").write_bytes(header())
    (root / "sub" / "deep.jsonl").write_bytes(header())
    (outside / "secret.jsonl").write_bytes(header())
    (root / "out.jsonl").symlink_to(outside / "secret.jsonl")
    (root / "dotdot.jsonl").symlink_to(root / ".." / "elsewhere" / "secret.jsonl")
    (root / "in.jsonl").symlink_to(root / "a.jsonl")
    os.mkfifo(root / "fifo.jsonl")
    catalog = Catalog([str(root)])

    assert sorted(c.name for c in catalog.refresh()) == ["a.jsonl", "in.jsonl"]
    for name in ("out.jsonl", "dotdot.jsonl", "fifo.jsonl", "../elsewhere/secret.jsonl", "sub/deep.jsonl"):
        with pytest.raises(UnknownCapture):
            catalog.get(name)


def test_a_name_seen_in_two_folders_gets_its_folder_in_front(tmp_path: Path) -> None:
    for folder in ("monday", "tuesday"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "c.jsonl").write_bytes(header())
    (tmp_path / "single.jsonl").write_bytes(header())
    catalog = Catalog([str(tmp_path / "monday"), str(tmp_path / "tuesday"), str(tmp_path / "single.jsonl")])
    assert sorted(c.name for c in catalog.refresh()) == ["monday/c.jsonl", "single.jsonl", "tuesday/c.jsonl"]


def test_two_folders_of_one_name_get_as_much_of_their_paths_as_tells_them_apart(tmp_path: Path) -> None:
    """`mcp ~/work/caps ~/home/caps`: both were named caps/c.jsonl, and the second could not
    be reached. A root given twice is still one capture."""
    for where in ("work/caps", "home/caps", "home/other"):
        (tmp_path / where).mkdir(parents=True)
        (tmp_path / where / "c.jsonl").write_bytes(header())
    roots = [str(tmp_path / where) for where in ("work/caps", "home/caps", "home/other", "work/caps")]
    assert sorted(c.name for c in Catalog(roots).refresh()) == [
        "home/caps/c.jsonl", "other/c.jsonl", "work/caps/c.jsonl"]


def test_a_growing_capture_is_read_only_where_it_grew(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(header() + message(1) + message(2)[:20])  # the bridge is writing record 2
    catalog = Catalog([str(tmp_path)])
    [capture] = catalog.refresh()
    assert (capture.messages, [r["seq"] for r in catalog.records(capture)]) == (1, [1])

    loads: list[bytes] = []
    real = load_record

    def counted(line: bytes, *, checked: bool = True) -> Json | None:
        loads.append(line)
        return real(line, checked=checked)

    monkeypatch.setattr("acp_bridge.capture.catalog.load_record", counted)
    with path.open("ab") as file:
        file.write(message(2)[20:] + message(3))
    [capture] = catalog.refresh()

    assert loads == [message(2)[:-1], message(3)[:-1]]  # nothing read twice
    assert (capture.messages, capture.last_seq) == (3, 3)
    assert [r["seq"] for r in catalog.records(capture, after=1)] == [2, 3]


def test_a_torn_last_line_is_not_read_again_until_the_file_grows(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A bridge killed while writing a long record leaves its start for ever: the watcher
    of `ui` (four refreshes a second) and every `mcp` call read it whole each time, 100 MiB
    of an embedded image as often as that, while nothing had changed."""
    path = tmp_path / "c.jsonl"
    torn = message(2, raw="x" * 3000)[:2500]
    path.write_bytes(header() + message(1) + torn)
    catalog = Catalog([str(tmp_path)])
    [capture] = catalog.refresh()
    assert capture.messages == 1

    def no_read(*args: object, **kwargs: object) -> None:
        raise AssertionError("read again though the file has not changed")

    with monkeypatch.context() as patched:
        patched.setattr("acp_bridge.capture.files.read_lines", no_read)
        [capture] = catalog.refresh()
        assert capture.messages == 1
        assert catalog.reread("c.jsonl").messages == 1

    with path.open("ab") as file:
        file.write(message(2, raw="x" * 3000)[2500:])
    [capture] = catalog.refresh()
    assert (capture.messages, capture.last_seq) == (2, 2)


def test_a_capture_cut_short_or_replaced_is_read_again_and_its_old_records_are_not_served(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(header() + message(1) + message(2) + message(3))
    catalog = Catalog([str(tmp_path)])
    [capture] = catalog.refresh()
    assert capture.messages == 3

    path.write_bytes(header() + message(1))  # truncated, then written again
    assert [r["seq"] for r in catalog.records(capture)] == []  # stale until the next refresh
    [capture] = catalog.refresh()
    assert (capture.messages, [r["seq"] for r in catalog.records(capture)]) == (1, [1])

    replacement = tmp_path / "new"
    replacement.write_bytes(header() + message(9) + message(10) + message(11) + message(12))
    replacement.rename(path)  # another file under the same name, longer than the first
    [capture] = catalog.refresh()
    assert [r["seq"] for r in catalog.records(capture)] == [9, 10, 11, 12]

    path.unlink()
    assert catalog.refresh() == []
    assert catalog.records(capture) == []


def test_records_after_any_seq_come_from_the_sparse_index(tmp_path: Path) -> None:
    count = catalog_module.INDEX_EVERY * 3 + 5
    (tmp_path / "c.jsonl").write_bytes(header() + b"".join(message(seq) for seq in range(1, count + 1)) + END)
    catalog = Catalog([str(tmp_path)])
    [capture] = catalog.refresh()
    assert len(capture._index) == 4
    for after in (0, 1, 255, 256, 257, 700, count - 1, count):
        got = [r["seq"] for r in catalog.records(capture, after=after, limit=3)]
        assert got == list(range(after + 1, min(after + 3, count) + 1))


def test_a_line_over_the_limit_is_passed_over_and_one_still_being_written_waits(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    huge = message(2, raw="x" * 5000)
    path.write_bytes(header() + message(1) + huge[:3000])
    catalog = Catalog([str(tmp_path)], max_line=1000)
    [capture] = catalog.refresh()
    assert (capture.messages, capture.read.offset) == (1, len(header() + message(1)))

    with path.open("ab") as file:
        file.write(huge[3000:] + message(3))
    [capture] = catalog.refresh()
    assert [r["seq"] for r in catalog.records(capture)] == [1, 3]


def test_v2_peers_are_named_by_their_info(tmp_path: Path) -> None:
    """ACP v2 names the peers `info` where v1 says `clientInfo` / `agentInfo`."""
    request = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
               "params": {"protocolVersion": 2, "info": {"name": "golden-client", "version": "1.0.0"}}}
    response = {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 2, "info": {"name": "v2-agent"}}}
    (tmp_path / "c.jsonl").write_bytes(
        header() + message(1, "initialize", raw=orjson.dumps(request).decode() + "\n")
        + message(2, "initialize", kind="response", raw=orjson.dumps(response).decode() + "\n"))
    [capture] = Catalog([str(tmp_path)]).refresh()
    assert (capture.client, capture.agent) == ("golden-client 1.0.0", "v2-agent")


def test_messages_come_as_stored_lines_with_their_records(tmp_path: Path) -> None:
    """`messages` hands out each stored line with its record (mcp's get_message serves the
    line as it is); `version` changes as the capture grows."""
    stored = message(2, raw='{"a":  1}\n')
    (tmp_path / "c.jsonl").write_bytes(header() + message(1) + b"not a record\n" + stored + FINDING + END)
    catalog = Catalog([str(tmp_path)])
    [capture] = catalog.refresh()
    assert [(line, record["seq"]) for line, record in catalog.messages(capture, after=1)] == [(stored[:-1], 2)]
    version = capture.version
    with (tmp_path / "c.jsonl").open("ab") as file:
        file.write(message(3))
    [capture] = catalog.refresh()
    assert capture.version != version


def test_reread_everything_and_a_new_generation_when_cut_short(tmp_path: Path) -> None:
    """`reread` reads one capture's growth; `everything` gives every record read so far (the
    header and end too, for stats and check); a capture cut short is of a new generation;
    one that is gone is unknown."""
    path = tmp_path / "c.jsonl"
    path.write_bytes(header() + message(1) + FINDING)
    catalog = Catalog([str(tmp_path)])
    [capture] = catalog.refresh()
    generation = capture.generation
    with path.open("ab") as file:
        file.write(message(2) + END + message(3)[:10])  # the last line still being written
    assert catalog.reread("c.jsonl").last_seq == 2 and capture.generation == generation
    assert [(r["type"], r.get("seq")) for r in catalog.everything(capture)] == [
        ("header", None), ("message", 1), ("finding", None), ("message", 2), ("end", None)]
    path.write_bytes(header() + message(7))
    assert catalog.reread("c.jsonl").last_seq == 7 and capture.generation != generation
    path.unlink()
    with pytest.raises(UnknownCapture):
        catalog.reread("c.jsonl")
    assert catalog.listed() == []


def test_fields_of_the_wrong_type_count_for_nothing_in_the_listing(tmp_path: Path) -> None:
    """The listing reads its few fields without the reader's check of every field: each is
    checked where it is read (a seq that is no integer is no seq; peers come from
    `raw_b64` when `raw` is no text, as the reader would have it)."""
    raw = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "clientInfo": {"name": "zed", "version": "1"}}}) + b"\n"
    lines = (message(True, "initialize", raw=5, raw_b64=base64.b64encode(raw).decode())
             + message(7, ["initialize"]) + message(3.0)  # type: ignore[arg-type]
             + b'{"type":"finding","total":true}\n{"type":"finding","total":0}\n')
    (tmp_path / "c.jsonl").write_bytes(header() + lines)
    [capture] = Catalog([str(tmp_path)]).refresh()
    assert (capture.messages, capture.last_seq, capture.findings, capture.client) == (3, 7, 1, "zed 1")


SECRET = message(1, raw='{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"outside":"secret"}}\n')


def swapped_tree(tmp_path: Path) -> tuple[Path, Path]:
    """A served folder (a.jsonl; linked.jsonl, a link to sub/b.jsonl) and an outside folder
    laid out the same, whose captures hold what must never be served."""
    served, outside = tmp_path / "served", tmp_path / "outside"
    for folder, body in ((served, message(1)), (outside, SECRET)):
        (folder / "sub").mkdir(parents=True)
        (folder / "a.jsonl").write_bytes(header() + body)
        (folder / "sub" / "b.jsonl").write_bytes(header() + body)
    (served / "linked.jsonl").symlink_to(served / "sub" / "b.jsonl")
    return served, outside


def swap(served: Path, outside: Path, what: str) -> str:
    """Replace `what` of the served folder by a link to its outside twin; the name to ask for."""
    if what == "file":
        (served / "a.jsonl").unlink()
        (served / "a.jsonl").symlink_to(outside / "a.jsonl")
        return "a.jsonl"
    moved = served / "sub" if what == "subfolder" else served
    moved.rename(moved.with_name(moved.name + ".old"))
    moved.symlink_to(outside / "sub" if what == "subfolder" else outside)
    return "linked.jsonl" if what == "subfolder" else "a.jsonl"


@pytest.mark.parametrize("what", ["served folder", "subfolder", "file"])
def test_a_folder_or_file_swapped_for_a_link_after_listing_is_not_followed(tmp_path: Path, what: str) -> None:
    """Every open walks down from / without following a link at any step: a path is not
    trusted because it was listed (a folder swapped under a polling page served an outside
    capture until the next refresh)."""
    served, outside = swapped_tree(tmp_path)
    catalog = Catalog([str(served)])
    assert sorted(c.name for c in catalog.refresh()) == ["a.jsonl", "linked.jsonl"]
    name = swap(served, outside, what)
    with pytest.raises(UnknownCapture):
        catalog.reread(name)
    assert name not in [c.name for c in catalog.refresh()]


def test_a_capture_given_by_path_is_not_followed_through_a_swapped_folder(tmp_path: Path) -> None:
    served, outside = swapped_tree(tmp_path)
    catalog = Catalog([str(served / "a.jsonl")])
    assert [c.name for c in catalog.refresh()] == ["a.jsonl"]
    swap(served, outside, "served folder")
    with pytest.raises(UnknownCapture):
        catalog.reread("a.jsonl")
