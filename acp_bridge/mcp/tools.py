"""The tools of `acp-bridge mcp`, as plain functions over a `Catalog`: what each answers, in
text an agent reads, with no MCP in sight (the SDK's side is `server`).

Owns: naming captures back to the catalog (never as paths), checking arguments (a bad one is
a `BadArgument`, which the server turns into a tool error), the answer of each of the
seven tools, and keeping each capture's findings until it changes. What they say is what
the commands say: `show`'s filters and summaries (`capture.summary`), `check`'s findings
and verdict (`health.offline`), `stats`' counts (`capture.stats`), `diff`'s differences
(`replay.compare`).

Must never: write anything, open a file the catalog did not list, un-redact (the catalog
serves every record masked again as the export masks it: masked ones stay masked), or answer beyond
`pages.MAX_TEXT`. One call at a time (the catalog is not thread-safe): the server runs them
in one worker thread.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterator, Sequence
from contextlib import closing

import orjson

from acp_bridge.capture.catalog import Capture, Catalog, UnknownCapture
from acp_bridge.capture.reader import record_bytes
from acp_bridge.capture.stats import CaptureStats
from acp_bridge.capture.summary import (
    AmbiguousSession,
    RecordFilter,
    detail_lines,
    resolve_session,
    summarize,
    utc_clock,
)
from acp_bridge.core.lines import MIB
from acp_bridge.core.pointer import parse_pointer
from acp_bridge.core.printable import printable
from acp_bridge.core.protocol import Json
from acp_bridge.health.findings import CODES, Finding
from acp_bridge.health.offline import Report, analyse
from acp_bridge.mcp.pages import MAX_TEXT, page, piece, utf8_size
from acp_bridge.replay.compare import DiffOptions, compare_captures

EXCERPT = 160  # characters of a message shown beside a finding or a search match
SHOWN_ARGUMENT = 80  # characters of a bad argument quoted back
DIRECTIONS = ("to-agent", "to-client")
NOTES_SHARE = 10  # diff_captures' notes (a session only one side has...) take at most this part of an answer
SUMMARY_LIST = 100  # entries of each list in capture_summary (per method, per code...); the rest counted


class BadArgument(ValueError):
    """An argument that names nothing there, or is out of range: the caller's mistake, said
    back to it as a tool error."""


def quoted(value: str) -> str:
    """A caller's string quoted back in a message: as JSON, cut short, controls escaped."""
    shown = value if len(value) <= SHOWN_ARGUMENT else value[:SHOWN_ARGUMENT] + "…"
    return orjson.dumps(shown).decode()


def line(obj: Json) -> str:
    """One entry of a list: a JSON object on one line. What orjson cannot write (an id beyond
    64 bits, as a capture keeps it; nesting past 254 levels) goes through the stdlib."""
    try:
        return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        try:
            return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)
        except (RecursionError, ValueError):
            return json.dumps({"unwritable": "nested too deep to write as JSON"})


def message_text(record: Json, key: str) -> str | None:
    """`raw` or `out` of a message record as text (bytes that are not UTF-8 replaced)."""
    data = record_bytes(record, key)
    return None if data is None else data.decode("utf-8", "replace")


def excerpt(text: str, at: int = 0, width: int = EXCERPT) -> str:
    """About `width` characters of `text` around `at`, made printable, with "…" where cut."""
    start = max(0, at - width // 4)
    end = start + width
    shown = printable(text[start:end].rstrip("\r\n"), quote_backslash=False)
    return ("…" if start else "") + shown + ("…" if end < len(text.rstrip("\r\n")) else "")


def _check_page(limit: int, offset: int) -> None:
    if limit < 1:
        raise BadArgument(f"limit must be at least 1, not {limit}")
    if offset < 0:
        raise BadArgument(f"offset must be 0 or more, not {offset}")


class Tools:
    """The tools over the captures of one catalog. Each call refreshes the catalog first, so
    a capture that appeared, grew or went away since is seen as it is now."""

    def __init__(self, catalog: Catalog, *, max_text: int = MAX_TEXT) -> None:
        self.catalog = catalog
        self.max_text = max_text
        self._reports: dict[str, tuple[tuple[int, int], Report]] = {}  # name -> (the capture's version, its report)

    def __repr__(self) -> str:
        return f"<Tools {self.catalog!r} reports={len(self._reports)}>"

    # -- naming captures

    def _refresh(self) -> list[Capture]:
        """The catalog found again; the findings kept of captures gone since forgotten."""
        listed = self.catalog.refresh()
        names = {each.name for each in listed}
        for name in [name for name in self._reports if name not in names]:
            del self._reports[name]
        return listed

    def capture(self, name: str) -> Capture:
        """The listed capture called `name` (looked up, never joined into a path)."""
        self._refresh()
        try:
            return self.catalog.get(name)
        except UnknownCapture:
            raise BadArgument(f"no capture named {quoted(name)}: list_captures gives their names") from None

    def _captures(self, name: str | None) -> list[Capture]:
        return [self.capture(name)] if name is not None else self._refresh()

    def report(self, capture: Capture) -> Report:
        """`check`'s findings and migration report of `capture`, computed again only when it
        has changed since."""
        kept = self._reports.get(capture.name)
        if kept is not None and kept[0] == capture.version:
            return kept[1]
        version = capture.version
        report = analyse(capture.name, self.catalog.everything(capture))
        self._reports[capture.name] = (version, report)
        return report

    def _stored(self, capture: Capture, seq: int) -> tuple[bytes, Json] | None:
        """The stored line and record of the message `seq` of `capture`."""
        with closing(self.catalog.messages(capture, after=seq - 1)) as messages:
            for stored, record in messages:
                return (stored, record) if record.get("seq") == seq else None
        return None

    # -- the tools

    def list_captures(self, limit: int = 200, offset: int = 0) -> str:
        _check_page(limit, offset)
        captures = self._refresh()

        def entry(capture: Capture) -> str:
            started = (capture.header or {}).get("started")
            return line({"name": capture.name, "started": started if isinstance(started, str) else None,
                         "client": capture.client, "agent": capture.agent, "messages": capture.messages,
                         "findings": capture.findings, "skipped": capture.skipped,
                         "live": self.catalog.live(capture)})

        return page(captures, entry, offset=offset, limit=limit, call="list_captures", max_text=self.max_text,
                    empty="(no captures in " + ", ".join(self.catalog.roots) + ")")

    def find_problems(self, capture: str | None = None, limit: int = 100, offset: int = 0) -> str:
        _check_page(limit, offset)
        found = [(each, finding) for each in self._captures(capture) for finding in self.report(each).findings]
        found.sort(key=lambda pair: -pair[1].level)  # worst first; stable: newest capture first, then by code

        def entry(pair: tuple[Capture, Finding]) -> str:
            where, finding = pair
            shown = None
            if finding.seq is not None and (stored := self._stored(where, finding.seq)) is not None:
                shown = excerpt(message_text(stored[1], "raw") or message_text(stored[1], "out") or "")
            return line({"capture": where.name, "level": finding.level.label, "code": finding.code,
                         "seq": finding.seq, "session": finding.session, "message": finding.text,
                         "excerpt": shown})

        scope = f"capture {quoted(capture)}" if capture is not None else "any capture"
        answer = page(found, entry, offset=offset, limit=limit, call="find_problems", max_text=self.max_text,
                      empty=f"(no findings in {scope})")
        codes = sorted({finding.code for _, finding in found})
        legend = [line({"code": code, "meaning": CODES[code].meaning, "advice": CODES[code].advice})
                  for code in codes if code in CODES]
        return "\n".join([answer, *(["what the codes mean:", *legend] if legend else [])])

    def show_messages(self, capture: str, *, methods: Sequence[str] = (), direction: str | None = None,
                      session: str | None = None, updates: Sequence[str] = (), text: str | None = None,
                      detail: int = 1, limit: int = 100, offset: int = 0) -> str:
        _check_page(limit, offset)
        if not 0 <= detail <= 3:
            raise BadArgument(f"detail is 0 (only failures), 1, 2 or 3, not {detail}")
        if direction is not None and direction not in DIRECTIONS:
            raise BadArgument(f"direction is to-agent or to-client, not {quoted(direction)}")
        if text == "":
            raise BadArgument("text, when given, must not be empty")
        where = self.capture(capture)
        if session is not None:
            session = self._session(where, session)
        keep = RecordFilter(tuple(methods), session, direction, tuple(updates))
        needle = None if text is None else text.casefold()

        def chosen() -> Generator[Json, None, None]:
            with closing(self.catalog.messages(where)) as messages:
                for _, record in messages:
                    if detail == 0 and record.get("verdict") != "error":
                        continue
                    if keep(record) and (needle is None or _find(record, needle) is not None):
                        yield record

        def entry(record: Json) -> str:
            summary = summarize(record, utc_clock).plain()
            return "\n".join([f"seq {record.get('seq')} {summary}", *detail_lines(record, detail)])

        with closing(chosen()) as messages:  # its file closed however far the page reads
            return page(messages, entry, offset=offset, limit=limit, call="show_messages", max_text=self.max_text,
                        empty=f"(no message of {quoted(where.name)} matched; it holds {where.messages})",
                        whole="get_message gives a message's whole record, piece by piece")

    def _session(self, capture: Capture, given: str) -> str:
        sessions = {str(record["session"]) for _, record in _closed(self.catalog.messages(capture))
                    if record.get("session") is not None}
        try:
            return resolve_session(given, sessions)
        except AmbiguousSession as exc:
            raise BadArgument(f"session {exc}") from None

    def get_message(self, capture: str, seq: int, offset: int = 0) -> str:
        if offset < 0:
            raise BadArgument(f"offset must be 0 or more, not {offset}")
        where = self.capture(capture)
        stored = self._stored(where, seq) if seq >= 1 else None
        if stored is None:
            held = f"its messages are seq 1 to {where.last_seq}" if where.last_seq else "it holds no message"
            if where.skipped:
                held += (f"; {where.skipped} line(s) longer than {self.catalog.max_line // MIB} MiB were passed over "
                         "unread")
            raise BadArgument(f"capture {quoted(where.name)} has no message with seq {seq} ({held})")
        return piece(stored[0].decode("utf-8", "replace"), offset, call="get_message", max_text=self.max_text)

    def capture_summary(self, capture: str, offset: int = 0) -> str:
        if offset < 0:
            raise BadArgument(f"offset must be 0 or more, not {offset}")
        where = self.capture(capture)
        check = self.report(where).as_json()
        check["path"] = where.name
        verdict = check.pop("verdict")
        for code in check["findings"]:
            shown = code["occurrences"][:SUMMARY_LIST]
            if len(shown) < len(code["occurrences"]):
                code["occurrences"] = [*shown, f"… find_problems with capture={quoted(where.name)} lists them all"]
        aggregate = CaptureStats()
        for record in self.catalog.everything(where):
            aggregate.add(record)
        stats = aggregate.as_json(unanswered=SUMMARY_LIST)  # a dict for each of those listed only
        for key in ("by_method", "latency", "rules"):
            if len(stats[key]) > SUMMARY_LIST:
                more = len(stats[key]) - SUMMARY_LIST
                stats[key] = [*stats[key][:SUMMARY_LIST], f"… and {more} more"]
        if aggregate.unanswered_count > SUMMARY_LIST:
            stats["unanswered"].append(f"… and {aggregate.unanswered_count - SUMMARY_LIST} more")
        summary = {"capture": where.name, "live": self.catalog.live(where), "verdict": verdict, "stats": stats,
                   "check": check}
        return piece(line(summary), offset, call="capture_summary", max_text=self.max_text)

    def diff_captures(self, a: str, b: str, ignore: Sequence[str] = (), strict_ids: bool = False,
                      limit: int = 200, offset: int = 0) -> str:
        _check_page(limit, offset)
        for pointer in ignore:
            try:
                parse_pointer(pointer)
            except ValueError as exc:
                raise BadArgument(f"ignore: {exc}") from None
        first, second = self.capture(a), self.capture(b)
        result = compare_captures(self.catalog.everything(first), self.catalog.everything(second),
                                  DiffOptions(ignore=tuple(ignore), strict_ids=strict_ids))
        names = (first.name, second.name)
        head = printable(result.summary(names), quote_backslash=False)
        notes = _bounded([printable(note, quote_backslash=False) for note in result.notes],
                         self.max_text // NOTES_SHARE)
        room = self.max_text - utf8_size(head) - sum(utf8_size(note) + 1 for note in notes) - 1
        differences = page(result.differences, lambda difference: difference.line(names), offset=offset,
                           limit=limit, call="diff_captures", max_text=max(room, 1), empty="")
        return "\n".join(part for part in (head, differences, *notes) if part)

    def search(self, text: str, capture: str | None = None, limit: int = 50, offset: int = 0) -> str:
        _check_page(limit, offset)
        if not text:
            raise BadArgument("text must not be empty")
        needle = text.casefold()
        captures = self._captures(capture)

        def found() -> Generator[tuple[Capture, Json, str, int], None, None]:
            for each in captures:
                with closing(self.catalog.messages(each)) as messages:
                    for _, record in messages:
                        hit = _find(record, needle)
                        if hit is not None:
                            yield each, record, *hit

        def entry(hit: tuple[Capture, Json, str, int]) -> str:
            where, record, matched, at = hit
            return line({"capture": where.name, "seq": record.get("seq"),
                         "summary": summarize(record, utc_clock).plain(), "excerpt": excerpt(matched, at)})

        scope = quoted(capture) if capture is not None else f"{len(captures)} captures"
        with closing(found()) as hits:
            return page(hits, entry, offset=offset, limit=limit, call="search", max_text=self.max_text,
                        empty=f"(no message in {scope} holds {quoted(text)})")


def _bounded(notes: list[str], budget: int) -> list[str]:
    """The first `notes` that fit in `budget` bytes, then one saying how many were left out."""
    kept: list[str] = []
    used = 0
    for note in notes:
        used += utf8_size(note) + 1
        if used > budget:
            return [*kept, f"(and {len(notes) - len(kept)} more notes: acp-bridge diff prints them all)"]
        kept.append(note)
    return kept


def _closed(messages: Generator[tuple[bytes, Json], None, None]) -> Iterator[tuple[bytes, Json]]:
    """Every item of a catalog's message generator, closed (and its file) however it ends."""
    with closing(messages):
        yield from messages


def _find(record: Json, needle: str) -> tuple[str, int] | None:
    """The message text (as it came, else as it was sent) holding `needle` (casefolded), and
    about where in it; None when neither does. Lengths can change when text is casefolded
    ("ß" is "ss"), so the place is exact only where they do not."""
    for key in ("raw", "out"):
        text = message_text(record, key)
        if text is None:
            continue
        folded = text.casefold()
        at = folded.find(needle)
        if at >= 0:
            return text, at if len(folded) == len(text) else 0
    return None
