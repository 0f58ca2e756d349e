"""Reading a capture a piece at a time as it grows (`Growth`, `grown_lines`, `stored_lines`):
what the catalog of `ui` and `mcp` reads through."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_bridge.capture.files import Growth, grown_lines, stored_lines
from acp_bridge.capture.reader import Line, LongLine


def read(path: Path, at: Growth, max_line: int = 1000) -> list[tuple[Line, int]]:
    with path.open("rb") as file:
        return list(grown_lines(file, at, max_line=max_line))


def stored(path: Path, at: Growth, start: int = 0, max_line: int = 1000) -> list[bytes]:
    with path.open("rb") as file:
        return list(stored_lines(file, at, start, max_line=max_line))


def start(path: Path) -> Growth:
    with path.open("rb") as file:
        return Growth.of(file)


@pytest.mark.parametrize(("first", "then", "lines_first", "lines_then"), [
    pytest.param(b"a\nb\n", b"c\n", [(b"a", 0), (b"b", 2)], [(b"c", 4)], id="whole-lines"),
    pytest.param(b"a\nbb", b"b\n", [(b"a", 0)], [(b"bbb", 2)], id="torn-last-line-waits"),
    pytest.param(b"a\n" + b"x" * 20, b"x\nz\n", [(b"a", 0)], [(LongLine(21, 10), 2), (b"z", 24)],
                 id="long-line-waits-for-its-newline"),
    pytest.param(b"\n\na\n", b"", [(b"", 0), (b"", 1), (b"a", 2)], [], id="blank-lines-and-nothing-new"),
])
def test_each_read_gives_the_whole_lines_grown_since_the_last(tmp_path: Path, first: bytes, then: bytes,
                                                              lines_first: list[tuple[Line, int]],
                                                              lines_then: list[tuple[Line, int]]) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(first)
    at = start(path)
    assert read(path, at, max_line=10) == lines_first
    assert at.offset == sum(len(line) + 1 if isinstance(line, bytes) else line.size + 1 for line, _ in lines_first)
    with path.open("ab") as file:
        file.write(then)
    assert read(path, at, max_line=10) == lines_then
    assert at.offset == len(first + then) - len((first + then).rsplit(b"\n", 1)[1])


def test_a_torn_tail_is_not_read_again_until_the_file_grows(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"a\ntorn")
    at = start(path)
    assert read(path, at) == [(b"a", 0)]
    assert (at.offset, at.size) == (2, 6)
    with path.open("rb") as file:
        file.seek(3)
        assert list(grown_lines(file, at)) == []
        assert file.tell() == 3  # not even a seek: nothing was read


def test_a_file_cut_short_or_replaced_is_known_and_its_stored_lines_are_not_served(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"a\nb\nc\n")
    at = start(path)
    read(path, at)
    assert stored(path, at) == [b"a", b"b", b"c"]
    assert stored(path, at, start=2) == [b"b", b"c"]
    with path.open("rb") as file:
        assert not at.replaced(file)
    path.write_bytes(b"a\n")  # cut short
    with path.open("rb") as file:
        assert at.replaced(file)
    assert stored(path, at) == []
    other = tmp_path / "other"
    other.write_bytes(b"a\nb\nc\nd\n")
    os.replace(other, path)  # another file, longer
    with path.open("rb") as file:
        assert at.replaced(file)
    assert stored(path, at) == []


def test_stored_lines_stop_where_the_last_read_stopped(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"a\n" + b"x" * 20 + b"\nb\n")
    at = start(path)
    read(path, at, max_line=10)
    with path.open("ab") as file:
        file.write(b"later\n")
    assert stored(path, at, max_line=10) == [b"a", b"b"]  # the long line passed over, `later` not read yet


@settings(max_examples=50, deadline=None)
@given(pieces=st.lists(st.binary(max_size=12).map(lambda data: data.replace(b"\r", b"\n")), max_size=8),
       max_line=st.integers(1, 8))
def test_reads_as_it_grows_give_what_one_read_of_the_whole_gives(tmp_path_factory: pytest.TempPathFactory,
                                                                 pieces: list[bytes], max_line: int) -> None:
    path = tmp_path_factory.mktemp("g") / "c.jsonl"
    path.write_bytes(b"")
    at = start(path)
    got: list[tuple[Line, int]] = []
    for piece in pieces:
        with path.open("ab") as file:
            file.write(piece)
        got += read(path, at, max_line=max_line)
    data = b"".join(pieces)
    whole, offset, want = data[:data.rfind(b"\n") + 1], 0, []
    for line in whole.split(b"\n")[:-1]:
        want.append((line if len(line) <= max_line else LongLine(len(line), max_line), offset))
        offset += len(line) + 1
    assert got == want
    assert at.offset == len(whole)
    assert stored(path, at, max_line=max_line) == [line for line, _ in want if isinstance(line, bytes)]
