"""core.scan.Finder: memmem where the C library has it, equal to bytes.find everywhere."""

from __future__ import annotations

import platform

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.core.scan import Finder, native

# Few letters, so that needles hit, miss, overlap and sit at either end.
alphabet = st.sampled_from([b'"', b"i", b"d", b"\\", b"u", b"\n", b"{", b"\x00", b"g"])
texts = st.lists(alphabet, max_size=80).map(b"".join)


@given(texts, texts, st.integers(-90, 90))
def test_finder_equals_bytes_find(body: bytes, needle: bytes, start: int) -> None:
    assert Finder(body).find(needle, start) == body.find(needle, start)
    assert Finder(body, use_native=False).find(needle, start) == body.find(needle, start)


@given(texts, st.sampled_from([b'"id"', b"uggestions", b"\\u"]), st.integers(0, 3), st.integers(0, 3))
def test_finder_finds_a_needle_wherever_it_is_put(body: bytes, needle: bytes, copies: int, cut: int) -> None:
    body = body[:cut * 20] + needle * copies + body[cut * 20:]
    finder = Finder(body)
    start = 0
    while (hit := body.find(needle, start)) >= 0:  # every hit, in order, from each start
        assert finder.find(needle, start) == hit
        start = hit + 1
    assert finder.find(needle, start) == -1


def test_finder_of_a_long_body_at_its_edges() -> None:
    body = b"x" * (1 << 20) + b'"id"'
    finder = Finder(body)
    assert [finder.find(b'"id"', s) for s in (0, (1 << 20), (1 << 20) + 1, len(body))] == [1 << 20, 1 << 20, -1, -1]


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="memmem through glibc")
def test_the_native_search_is_the_one_taken_on_glibc() -> None:
    assert native() is not None
    assert Finder(b"abc").is_native
    assert not Finder(b"abc", use_native=False).is_native
    assert not Finder(bytearray(b"abc")).is_native  # type: ignore[arg-type]  # only bytes objects
