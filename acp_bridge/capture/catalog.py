"""The captures in the folders a user names: which they are, what each holds, and its records
as it grows. `acp-bridge ui` and `acp-bridge mcp` both stand on it.

Owns: listing the capture files of the given folders (and files), naming them, resolving a
name back to its file without ever leaving those folders, and an index of each capture kept
up to date incrementally: a refresh reads only what was appended since the last one, so a
growing capture costs what it grew by, and a 200,000-message capture is not read again for
every request. A capture that shrinks or is replaced is read again from its start (what it
held before is no longer served); one that disappears leaves the listing.

What counts as a capture: a regular file named `*.jsonl` directly in a given folder (not in
its subfolders), or a file given by path, whose first record is a header of a known format.
A symbolic link is followed only when its target stays inside the folder it is in; every open
walks down to the real path the listing found without following any link (`files.open_beneath`),
so a folder or file swapped for a link after it was listed is not followed out. Names are
the file names; when two folders hold the same name, the folder's name is put in front.

Must never: write anything, follow a path a caller builds from a name (names are looked up,
never joined), or hold a line longer than its limit (`SERVED_RECORD`: a longer one is passed
over unread, counted in `skipped`). Not thread-safe: one thread
at a time (the servers run it in a worker thread, one call at a time).
"""

from __future__ import annotations

import bisect
import itertools
import json
import os
from collections import Counter
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from typing import IO, Any

import orjson

from acp_bridge.capture.files import Growth, grown_lines, open_beneath, stored_lines
from acp_bridge.capture.masking import mask_record
from acp_bridge.capture.reader import (
    LongLine,
    UnreadableCapture,
    check_fields,
    header_problem,
    load_record,
    record_message,
)
from acp_bridge.capture.records import safe_dumps
from acp_bridge.capture.redaction import Redactor, valid_pointers
from acp_bridge.core.lines import MIB
from acp_bridge.core.methods import INITIALIZE
from acp_bridge.core.protocol import Json

SUFFIX = ".jsonl"
# The longest record the servers read (a longer one is passed over unread and counted, as
# `show` passes over a line past the reader's limit): four times the relay's default parse
# limit, the record of a 16 MiB line with what it went out as, both escaped. Whatever a
# capture holds, a server holds a small multiple of this at most.
SERVED_RECORD = 64 * MIB
INDEX_EVERY = 256  # one (seq, offset) pair kept per this many messages
_generations = itertools.count(1)


class UnknownCapture(LookupError):
    """A name that is not one of the listed captures."""


def _peer(info: Any) -> str | None:
    """`clientInfo` / `agentInfo` as "name version", or None."""
    if not isinstance(info, dict):
        return None
    name, version = info.get("name"), info.get("version")
    if not isinstance(name, str):
        return None
    return f"{name} {version}" if isinstance(version, str) and version else name


@dataclass
class Capture:
    """One capture and what is known of it so far (`Catalog.refresh` keeps it current)."""

    name: str
    path: str
    header: Json | None = None
    problem: str | None = None  # why it is not read as a capture (then it is not listed)
    messages: int = 0
    findings: int = 0
    skipped: int = 0  # lines longer than the catalog's limit, passed over unread
    last_seq: int = 0
    ended: bool = False
    client: str | None = None
    agent: str | None = None
    # a new number each time the capture is read again from its start (replaced, cut short):
    # what a reader holds of an older generation is no longer the capture's
    generation: int = 0
    # where reading goes on: the file's identity, the offset after the last whole line, and
    # the file's size when it was last read (a torn tail is not read again until it grows)
    read: Growth = field(default_factory=Growth)
    _index: list[tuple[int, int]] = field(default_factory=list)  # (seq, offset of its line)
    _redactor: Redactor | None = None  # of the header's pointers, made when first asked for

    @property
    def started(self) -> float | None:
        value = self.header.get("time") if self.header else None
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    @property
    def version(self) -> tuple[int, int]:
        """Changes whenever what the last refresh read of the capture changes: what is
        computed from the capture as it was (findings, stats) can be kept until then."""
        return self.generation, self.read.offset

    @property
    def pid(self) -> int | None:
        value = self.header.get("pid") if self.header else None
        return value if type(value) is int else None

    def restart(self, read: Growth) -> None:
        """Forget what was read: the capture is read again from `read` (its top)."""
        self.header, self.problem, self.ended = None, None, False
        self.messages = self.findings = self.skipped = self.last_seq = 0
        self.client = self.agent = None
        self.generation = next(_generations)
        self.read, self._index = read, []
        self._redactor = None

    @property
    def redactor(self) -> Redactor:
        """The capture's redaction: the default secrets and its header's pointers."""
        if self._redactor is None:
            self._redactor = Redactor(valid_pointers((self.header or {}).get("redact")))
        return self._redactor

    def take(self, record: Json, offset: int) -> None:
        """Count `record`, read at `offset` (its fields not checked yet: what is read of it is checked here)."""
        kind = record["type"]
        if kind == "message":
            seq = record.get("seq")
            if type(seq) is int:
                if self.messages % INDEX_EVERY == 0:
                    self._index.append((seq, offset))
                self.last_seq = max(self.last_seq, seq)
            self.messages += 1
            if record.get("method") == INITIALIZE:
                self._note_peers(check_fields(record))
        elif kind == "finding":
            self.findings += 1 if not record.get("total") else 0
        elif kind == "end":
            self.ended = True

    def _note_peers(self, record: Json) -> None:
        message = record_message(record, "raw")
        if not isinstance(message, dict):
            return
        # v1 says clientInfo / agentInfo, v2 info (as health.offline reads them)
        if record.get("kind") == "request" and isinstance(params := message.get("params"), dict):
            self.client = _peer(params.get("clientInfo")) or _peer(params.get("info")) or self.client
        elif record.get("kind") == "response" and isinstance(result := message.get("result"), dict):
            self.agent = _peer(result.get("agentInfo")) or _peer(result.get("info")) or self.agent

    def start_of(self, after: int) -> int:
        """An offset from which every message with `seq > after` is read."""
        at = bisect.bisect_right(self._index, (after + 1, -1)) - 1
        return self._index[at][1] if at >= 0 else 0


def _label(name: str, real: str, depth: int) -> str:
    """`name` with the last `depth` folders of the path `real` in front of it."""
    folders = os.path.dirname(real).split("/")[1:]  # an absolute path: the first is ""
    return "/".join([*folders[max(0, len(folders) - depth):], name]) if depth else name


class Catalog:
    """The captures of `roots` (folders and files), found again at each `refresh`.

    `alive(pid)` says whether a bridge's process still runs: a capture with no end record
    whose bridge runs is live. The commands give the system's answer (shell.posix); tests
    give their own.
    """

    def __init__(self, roots: Sequence[str], *, alive: Callable[[int], bool] = lambda pid: False,
                 max_line: int = SERVED_RECORD) -> None:
        self.roots = [os.path.realpath(root) for root in roots]
        self.alive = alive
        self.max_line = max_line
        self._captures: dict[str, Capture] = {}

    def __repr__(self) -> str:
        return f"<Catalog roots={self.roots!r} captures={len(self._captures)}>"

    def _files(self) -> Iterator[tuple[str, str]]:
        """(file name, real path) of every candidate, roots in order."""
        for root in self.roots:
            if os.path.isfile(root):
                yield os.path.basename(root), root
                continue
            try:
                names = sorted(os.listdir(root))
            except OSError:
                continue
            for name in names:
                if not name.endswith(SUFFIX):
                    continue
                real = os.path.realpath(os.path.join(root, name))
                if os.path.dirname(real) == root or os.path.commonpath([root, real]) == root:
                    yield name, real

    def _names(self) -> dict[str, str]:
        """name -> real path: the name a file is listed by, with as many of its folders in
        front as tell it apart from another of the same name (`monday/c.jsonl`; two roots
        of one name, `work/caps/c.jsonl`)."""
        found = list(dict.fromkeys(self._files()))  # a root given twice: once
        named: dict[str, str] = {}
        deepest = max((real.count("/") for _, real in found), default=0)
        for depth in range(deepest + 1):
            labels = [_label(name, real, depth) for name, real in found]
            counts = Counter(labels)
            for label, (_, real) in zip(labels, found, strict=True):
                if counts[label] == 1:
                    named[label] = real
            found = [pair for label, pair in zip(labels, found, strict=True) if counts[label] > 1]
        for name, real in found:  # links of one name to one folder: the first
            named.setdefault(_label(name, real, deepest), real)
        return named

    def refresh(self) -> list[Capture]:
        """Find the captures again and read what each has grown by; newest first."""
        current: dict[str, Capture] = {}
        for name, real in self._names().items():
            capture = self._captures.get(name)
            if capture is None or capture.path != real:
                capture = Capture(name, real)
            if self._update(capture):
                current[name] = capture
        self._captures = current
        return self.listed()

    def listed(self) -> list[Capture]:
        """The captures found by the last refresh, newest first."""
        shown = [c for c in self._captures.values() if c.problem is None and c.header is not None]
        return sorted(shown, key=lambda c: (-(c.started or 0.0), c.name))

    def get(self, name: str) -> Capture:
        capture = self._captures.get(name)
        if capture is None or capture.problem is not None or capture.header is None:
            raise UnknownCapture(name)
        return capture

    def reread(self, name: str) -> Capture:
        """The capture `name` with what it has grown by since the last refresh read (the
        listing itself is left as it is). Raises UnknownCapture when it is not listed or gone."""
        capture = self.get(name)
        if not self._update(capture):
            del self._captures[name]
            raise UnknownCapture(name)
        return self.get(name)

    def live(self, capture: Capture) -> bool:
        return not capture.ended and capture.pid is not None and self.alive(capture.pid)

    @staticmethod
    def _open(capture: Capture) -> IO[bytes] | None:
        """The capture's file (the real path the listing found inside a served folder),
        opened without following a link at any step: a folder or the file swapped for a link
        since it was listed is not followed out. None when it is gone, or no regular file."""
        try:
            return open_beneath(capture.path)
        except UnreadableCapture:
            return None

    def _update(self, capture: Capture) -> bool:
        """Read what `capture` has grown by. False: it is gone."""
        file = self._open(capture)
        if file is None:
            return False
        with file:
            if capture.read.replaced(file):
                capture.restart(Growth.of(file))  # replaced or cut short: read again from the start
            if capture.problem is not None:
                return True
            # only whole lines: a last line still unfinished is read when it is (`grown_lines`)
            for line, offset in grown_lines(file, capture.read, max_line=self.max_line):
                if isinstance(line, LongLine):  # passed over unread
                    capture.skipped += 1
                elif capture.header is not None:
                    # `take` checks what it reads: the fields are not checked one by one here
                    if (record := load_record(line, checked=False)) is not None:
                        capture.take(record, offset)
                elif line.strip():
                    record = load_record(line)
                    capture.problem = header_problem(record)
                    if capture.problem is not None:
                        break
                    capture.header = record
        return True

    def records(self, capture: Capture, after: int = 0, limit: int = 1000) -> list[Json]:
        """Up to `limit` message records of `capture` with `seq > after`, in order, as read
        at the last refresh (never past it: a client asking twice sees no record twice)."""
        with closing(self.messages(capture, after)) as found:
            return [record for _, record in itertools.islice(found, limit)]

    def messages(self, capture: Capture, after: int = 0) -> Generator[tuple[bytes, Json], None, None]:
        """Each message of `capture` with `seq > after`, in order, as its stored line (without
        the newline) and its record, masked again by the capture's redaction (as the export
        masks them: a line masked here is written again), as far as the last refresh read. The file stays open
        while the generator is: close it (`contextlib.closing`) when stopping early."""
        with closing(self._stored(capture, capture.start_of(after))) as lines:
            for line in lines:
                record = load_record(line)
                if record is None or record["type"] != "message":
                    continue
                seq = record.get("seq")
                if type(seq) is int and seq > after:
                    masked = mask_record(capture.redactor, record)
                    yield (line if masked is record else _written(masked)), masked

    def everything(self, capture: Capture) -> Iterator[Json]:
        """Every record of `capture` (header, messages, findings, end) in file order, masked
        again as `messages` masks them, as read at the last refresh; nothing when it was
        replaced or cut short since (as `records`)."""
        with closing(self._stored(capture, 0)) as lines:
            for line in lines:
                if (record := load_record(line)) is not None:
                    yield mask_record(capture.redactor, record)

    def _stored(self, capture: Capture, start: int) -> Generator[bytes, None, None]:
        """The whole lines of `capture` from offset `start` to where the last refresh read,
        without their newlines (a line over the limit passed over); nothing when the file was
        replaced or cut short since (the next refresh reads it again)."""
        file = self._open(capture)
        if file is None:
            return
        with file:
            yield from stored_lines(file, capture.read, start, max_line=self.max_line)


def _written(record: Json) -> bytes:
    """A record masked here as one line: an id past 64 bits, which orjson will not write,
    through the stdlib, which writes it exactly."""
    try:
        return orjson.dumps(record)
    except TypeError:
        try:
            return json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str).encode(
                "utf-8", "surrogatepass")
        except (RecursionError, ValueError):  # nested too deep: what cannot be written gives way
            return safe_dumps(record).rstrip(b"\n")
