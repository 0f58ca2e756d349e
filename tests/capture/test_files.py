"""`read_lines`: the lines of a capture, in linear time and bounded memory on any input."""

from __future__ import annotations

import io
from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from acp_bridge.capture.files import read_lines
from acp_bridge.capture.reader import Line, LongLine, Unterminated


class Chunky(io.BytesIO):
    """A file whose reads return pieces of the given sizes (then whatever is asked)."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        super().__init__(data)
        self.sizes: Iterator[int] = iter(sizes)

    def read(self, size: int | None = -1) -> bytes:
        return super().read(min(next(self.sizes, size or -1), size or -1) if size and size > 0 else size)


def expected(data: bytes, max_line: int) -> list[Line]:
    lines: list[bytes] = data.split(b"\n")
    last = lines.pop()
    if last:
        lines.append(Unterminated(last))
    return [line if len(line) <= max_line else LongLine(len(line), max_line) for line in lines]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([b"a", b"bc", b"\n", b"\n\n", b"xyz" * 5]), max_size=40).map(b"".join),
       st.lists(st.integers(1, 9), max_size=40), st.integers(1, 20))
def test_lines_are_the_input_split_at_newlines_and_long_ones_only_measured(data: bytes, sizes: list[int],
                                                                          max_line: int) -> None:
    lines = list(read_lines(Chunky(data, sizes), max_line=max_line))
    assert lines == expected(data, max_line)
    assert [type(line) for line in lines] == [type(line) for line in expected(data, max_line)]


def test_a_long_line_is_read_whole() -> None:
    """64 MiB in one line, read 1 MiB at a time (its pieces are joined once, when it ends:
    re-joining at every read made this take 41 s)."""
    data = b"x" * (64 << 20) + b"\nnext\n"
    assert [len(line) if isinstance(line, bytes) else line.size for line in read_lines(io.BytesIO(data))] == [64 << 20, 4]


def test_a_line_past_max_line_is_skipped_unread() -> None:
    """Input past max_line: only its length stands for it, memory stays bounded."""
    data = b"0" * 5000 + b"\n" + b"ok\n"
    assert list(read_lines(Chunky(data, [700] * 20), max_line=1000)) == [LongLine(5000, 1000), b"ok"]
