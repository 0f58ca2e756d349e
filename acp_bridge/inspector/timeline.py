"""A capture's page rows as it grows: the export's rows (`capture/html_rows.RowBuilder`),
built once per capture and handed out by index to every page that shows it.

Owns: advancing the row builder over the records the catalog has read, only as far as a page
asks; keeping the rows handed out, packed (zlib'd JSON in blocks) so that a 200,000-message
capture costs the server a few MiB; the row of a run of chunks still being folded (sent
apart, as `pending`, since it grows); starting again when the capture is read again from its
start (a new generation). Must never: hold the records themselves, or run in the event loop
(it reads files: the server calls it in a worker thread, one call at a time).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from contextlib import closing

import orjson

from acp_bridge.capture.catalog import Capture, Catalog
from acp_bridge.capture.html_rows import RowBuilder
from acp_bridge.core.protocol import Json

BLOCK = 2000  # rows per packed block
ROWS_BYTES = 8 * 1024 * 1024  # rows per answer while their texts come to less (at least one)


def _dumps(rows: list[Json]) -> bytes:
    try:
        return orjson.dumps(rows)
    except TypeError:  # an integer past 64 bits or a lone surrogate a record was edited to hold
        return orjson.dumps(rows, default=str, option=orjson.OPT_NON_STR_KEYS)


class Rows:
    """Rows by index: full blocks packed, the last block as it is."""

    def __init__(self) -> None:
        self._packed: list[bytes] = []
        self._tail: list[Json] = []

    def __len__(self) -> int:
        return len(self._packed) * BLOCK + len(self._tail)

    def append(self, row: Json) -> None:
        self._tail.append(row)
        if len(self._tail) == BLOCK:
            self._packed.append(zlib.compress(_dumps(self._tail), 1))
            self._tail = []

    def slice(self, start: int, limit: int) -> list[Json]:
        out: list[Json] = []
        index = max(0, start)
        while len(out) < limit and index < len(self):
            block, at = divmod(index, BLOCK)
            rows = orjson.loads(zlib.decompress(self._packed[block])) if block < len(self._packed) else self._tail
            taken = rows[at:at + limit - len(out)]
            out.extend(taken)
            index += len(taken)
        return out


class Timeline:
    """The rows of one capture, of one generation."""

    def __init__(self, capture: Capture, clock: Callable[[float], str]) -> None:
        self.generation = capture.generation
        self.builder = RowBuilder(capture.redactor, clock)  # the catalog's: its records come masked
        self.rows = Rows()
        self.read_to = 0  # the last seq fed to the builder

    def __repr__(self) -> str:
        return f"<Timeline generation={self.generation} rows={len(self.rows)} read_to={self.read_to}>"

    def advance(self, catalog: Catalog, capture: Capture, want: int) -> None:
        """Feed the builder what the catalog has read of `capture`, until there are `want`
        rows or nothing is left."""
        if len(self.rows) >= want or self.read_to >= capture.last_seq:
            return
        # one record at a time: a list of them held thousands of lines of up to 64 MiB each
        with closing(catalog.messages(capture, after=self.read_to)) as records:
            for _, record in records:
                for row in self.builder.add(record):
                    self.rows.append(row)
                self.read_to = max(self.read_to, int(record["seq"]))
                if len(self.rows) >= want:
                    return

    def page(self, after: int, limit: int) -> Json:
        """Rows from index `after` on (at most `limit`), the folding row, and the figures
        the page's head line shows."""
        rows = _within(self.rows.slice(after, limit), ROWS_BYTES)
        caught_up = after + len(rows) >= len(self.rows)
        return {
            "generation": self.generation, "start": after, "rows": rows,
            "pending": self.builder.pending() if caught_up else None,
            "total": len(self.rows), "messages": self.builder.messages, "turns": self.builder.turns,
        }


def _within(rows: list[Json], budget: int) -> list[Json]:
    """The first `rows` while their texts (a row keeps up to 20,000 characters of a message
    and as many of what went out) come to less than `budget`; at least one."""
    used = 0
    for count, row in enumerate(rows):
        used += sum(len(text) for key in ("b", "o") if isinstance(text := row.get(key), str))
        if used >= budget:
            return rows[:count + 1]
    return rows


class Timelines:
    """One timeline per capture name, made when a page first asks for it."""

    def __init__(self, catalog: Catalog, clock: Callable[[float], str]) -> None:
        self.catalog = catalog
        self.clock = clock
        self._by_name: dict[str, Timeline] = {}

    def forget(self, names: set[str]) -> None:
        """Drop the timelines of the captures not in `names` (gone from the listing)."""
        for name in [name for name in self._by_name if name not in names]:
            del self._by_name[name]

    def rows(self, name: str, after: int, limit: int) -> Json:
        """A page of rows of capture `name` (read again for what it grew by).

        Raises:
            UnknownCapture: `name` is no capture of the catalog (any more).
        """
        try:
            capture = self.catalog.reread(name)
        except LookupError:
            self._by_name.pop(name, None)
            raise
        timeline = self._by_name.get(name)
        if timeline is None or timeline.generation != capture.generation:
            timeline = self._by_name[name] = Timeline(capture, self.clock)
        timeline.advance(self.catalog, capture, after + limit + 1)
        page = timeline.page(after, limit)
        header = capture.header or {}
        page["bridge"], page["started"] = str(header.get("bridge", "?")), str(header.get("started", "?"))
        return page
