"""LineSplitter: lines keep their exact terminator, partial lines wait, long lines stream."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.core import LineSplitter, Opaque
from tests.core.helpers import split_at


def pieces_bytes(pieces: list[bytes | Opaque]) -> bytes:
    return b"".join(p.data if isinstance(p, Opaque) else p for p in pieces)


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        pytest.param([b"a\nb\n"], [b"a\n", b"b\n"], id="two-lines"),
        pytest.param([b"a\r\nb\n"], [b"a\r\n", b"b\n"], id="crlf-kept"),
        pytest.param([b"a", b"b", b"\n"], [b"ab\n"], id="line-across-chunks"),
        pytest.param([b"\n\n"], [b"\n", b"\n"], id="blank-lines"),
        pytest.param([b"a\nbc"], [b"a\n"], id="partial-tail-held"),
        pytest.param([b"a\r", b"\n"], [b"a\r\n"], id="crlf-split-between-chunks"),
        pytest.param([b""], [], id="empty-chunk"),
    ],
)
def test_lines_come_out_with_their_terminators(chunks: list[bytes], expected: list[bytes]) -> None:
    splitter = LineSplitter()
    out: list[bytes | Opaque] = []
    for chunk in chunks:
        out.extend(splitter.feed(chunk))
    assert out == expected


def test_partial_last_line_comes_out_at_eof_without_terminator() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b'{"a":1}\n{"b"') == [b'{"a":1}\n']
    assert splitter.buffered == 4
    assert splitter.feed_eof() == [b'{"b"']
    assert splitter.feed_eof() == []


def test_line_over_the_limit_streams_as_opaque_pieces_as_they_arrive() -> None:
    """Beyond max_line nothing is held: each chunk leaves at once, the end is marked."""
    splitter = LineSplitter(max_line=8)
    assert splitter.feed(b"12345") == []
    assert splitter.feed(b"6789") == [Opaque(b"123456789", end=False)]
    assert splitter.buffered == 0
    assert splitter.feed(b"abc") == [Opaque(b"abc", end=False)]
    assert splitter.feed(b"de\nok\n") == [Opaque(b"de\n", end=True), b"ok\n"]


def test_complete_line_over_the_limit_in_one_chunk_is_opaque() -> None:
    splitter = LineSplitter(max_line=4)
    assert splitter.feed(b"123456\nab\n") == [Opaque(b"123456\n", end=True), b"ab\n"]


def test_opaque_line_cut_by_eof_is_closed() -> None:
    splitter = LineSplitter(max_line=2)
    assert splitter.feed(b"abcd") == [Opaque(b"abcd", end=False)]
    assert splitter.feed_eof() == [Opaque(b"", end=True)]


@pytest.mark.detail
def test_many_small_chunks_of_one_long_line_stay_linear() -> None:
    """A line fed a byte at a time is joined once, not re-copied per chunk."""
    splitter = LineSplitter()
    data = b"x" * 200_000
    for i in range(0, len(data), 1):
        assert splitter.feed(data[i : i + 1]) == []
    assert splitter.feed(b"\n") == [data + b"\n"]


@given(data=st.binary(max_size=2048), cuts=st.lists(st.integers(0, 2048), max_size=20),
       limit=st.integers(1, 64))
def test_any_chunking_gives_back_the_same_bytes(data: bytes, cuts: list[int], limit: int) -> None:
    splitter = LineSplitter(max_line=limit)
    out: list[bytes | Opaque] = []
    for part in split_at(data, cuts):
        out.extend(splitter.feed(part))
    out.extend(splitter.feed_eof())
    assert pieces_bytes(out) == data
    for piece in out:
        if not isinstance(piece, Opaque):
            assert len(piece) <= limit
            assert b"\n" not in piece[:-1]
