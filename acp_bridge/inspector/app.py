"""The inspector's pages and JSON API over a catalog of captures (`acp-bridge ui`).

    GET /                                   the page (capture/assets: the export's page, live)
    GET /assets/{page.js,page.css,live.js}  its files
    GET /api/captures                       the captures, newest first
    GET /api/captures/{name}/messages?after=SEQ[&wait=S][&limit=N]   records with seq > SEQ
    GET /api/captures/{name}/rows?after=ROW[&wait=S][&seen=SEQ][&generation=G]  the page's rows from ROW
    GET /api/captures/{name}/stats          what `stats --json` prints
    GET /api/captures/{name}/findings       what `check --json` prints for it
                                            (both given up when the page that asked goes away)

A name is looked up in the catalog, never made into a path; it may hold a slash (folder/file).
`wait` makes a long poll: the answer is held (at most MAX_WAIT s) until there is something new.

Owns: the routes, their bounds (page sizes, waits), and `Inspector`, the state behind them:
the catalog and the timelines, touched only in a worker thread, one call at a time, and a
watcher that reads what the captures grew by a few times a second and wakes the long polls.
Must never: block the event loop on a file, write a capture, or serve anything the catalog
does not list. The door (token, Host, Origin, methods) is `guard.py`, around all of it.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Callable, Iterator
from contextlib import closing
from typing import Any, TypeVar

import orjson
import trio
from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from acp_bridge.capture.catalog import Capture, Catalog, UnknownCapture
from acp_bridge.capture.html import asset, live_page
from acp_bridge.capture.stats import CaptureStats
from acp_bridge.core.protocol import Json
from acp_bridge.health.offline import findings_json
from acp_bridge.inspector.guard import CSP, Guard
from acp_bridge.inspector.timeline import Timelines

MAX_WAIT = 30.0  # seconds a long poll is held at most
MESSAGES_LIMIT = 1000  # records per answer at most
MESSAGES_BYTES = 8 * 1024 * 1024  # records per answer while their lines come to less (at least one)
ROWS_LIMIT = 4000  # rows per answer at most
WATCH_EVERY = 0.25  # seconds between two reads of what the captures grew by
GONE_EVERY = 1024  # records read between two looks at whether the page that asked is gone
ASSETS = {"page.js": "text/javascript", "page.css": "text/css", "live.js": "text/javascript"}
T = TypeVar("T")
log = logging.getLogger(__name__)


class _CaptureName(Convertor[str]):
    """A capture's name in a route: any characters, a newline among them (a file name may
    hold one; Starlette's `path` is `.*`, which stops at it: such a capture was listed and
    never served)."""

    regex = "(?s:.*)"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("capture", _CaptureName())


class Abandoned(Exception):
    """The page that asked went away before the answer was ready (it moved to another
    capture): the work stopped, so that what the page asks next does not wait behind it."""


class BadQuery(ValueError):
    """A query parameter that is no number of the kind asked."""


def _json(data: Any, status: int = 200) -> Response:
    try:
        body = orjson.dumps(data)
    except TypeError:  # a record or finding holding what orjson will not write (an id past 64 bits)
        try:  # the stdlib writes such an integer with all its digits, as the capture holds it
            body = json.dumps(data, separators=(",", ":"), default=str).encode()
        except (RecursionError, ValueError):
            body = orjson.dumps(data, default=str)
    return Response(body, status, media_type="application/json")


def _number(request: Request, key: str, default: float, *, low: float, high: float) -> float:
    text = request.query_params.get(key)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise BadQuery(f"{key} must be a number") from None
    if not math.isfinite(value):
        raise BadQuery(f"{key} must be a number")
    return min(max(value, low), high)


class Inspector:
    """The catalog, the timelines and the watcher of one inspector."""

    def __init__(self, roots: list[str], *, alive: Callable[[int], bool], clock: Callable[[float], str]) -> None:
        self.catalog = Catalog(roots, alive=alive)
        self.timelines = Timelines(self.catalog, clock)
        self._lock = trio.Lock()
        self._grown = trio.Event()
        self._seen: object = None
        self._reports: dict[str, tuple[tuple[object, ...], dict[str, Json]]] = {}

    def __repr__(self) -> str:
        return f"<Inspector {self.catalog!r}>"

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in a worker thread, one call at a time (the catalog is not thread-safe)."""
        async with self._lock:
            return await trio.to_thread.run_sync(fn, *args)

    async def watch(self, every: float = WATCH_EVERY) -> None:
        """Read what the captures grew by, and wake the long polls when any did."""
        while True:
            try:
                seen = await self.call(self._refresh)
            except OSError as exc:  # a folder or file that cannot be read now: next time
                log.warning("reading the captures: %s", exc)
                seen = self._seen
            if seen != self._seen:
                self._seen = seen
                self._grown.set()
                self._grown = trio.Event()
            await trio.sleep(every)

    def _refresh(self) -> object:
        listed = self.catalog.refresh()
        names = {c.name for c in listed}
        self.timelines.forget(names)  # what was kept for a capture that is gone
        for name in [name for name in self._reports if name not in names]:
            del self._reports[name]
        return [(c.name, c.generation, c.last_seq, c.messages, c.findings, c.skipped, c.ended) for c in listed]

    async def wait_growth(self, seconds: float) -> None:
        with trio.move_on_after(seconds):
            await self._grown.wait()

    # -- in the worker thread ------------------------------------------------------------

    def listing(self) -> list[Json]:
        return [{"name": c.name, "live": self.catalog.live(c), "messages": c.messages, "findings": c.findings,
                 "skipped": c.skipped, "client": c.client, "agent": c.agent, "started": c.started, "ended": c.ended,
                 "last_seq": c.last_seq} for c in self.catalog.refresh()]

    def messages(self, name: str, after: int, limit: int) -> list[Json]:
        """Up to `limit` records with `seq > after`, while their lines come to less than
        MESSAGES_BYTES (at least one): a page of 1000 records of up to 64 MiB each is held
        whole, twice (the records, then the answer)."""
        capture = self.catalog.reread(name)
        found: list[Json] = []
        size = 0
        with closing(self.catalog.messages(capture, after)) as messages:
            for line, record in messages:
                found.append(record)
                size += len(line)
                if len(found) == limit or size >= MESSAGES_BYTES:
                    break
        return found

    def report(self, name: str, kind: str, gone: threading.Event | None = None) -> Json:
        """`stats` or `findings` of a capture, computed again only when it has grown. The
        page asks for both at once: both come of one read of the capture.

        Raises:
            Abandoned: `gone` was set while the capture was being read (nothing is kept).
        """
        capture = self.catalog.reread(name)
        key = (capture.generation, capture.last_seq, capture.messages, capture.findings, capture.ended)
        cached = self._reports.get(name)
        if cached is None or cached[0] != key:
            cached = self._reports[name] = (key, self._compute(capture, gone))
        return cached[1][kind]

    def _compute(self, capture: Capture, gone: threading.Event | None) -> dict[str, Json]:
        stats = CaptureStats()

        def counted() -> Iterator[Json]:
            for n, record in enumerate(self.catalog.everything(capture)):
                if gone is not None and n % GONE_EVERY == 0 and gone.is_set():
                    raise Abandoned(capture.name)
                stats.add(record)
                yield record

        findings = findings_json(capture.name, counted())
        return {"stats": stats.as_json(), "findings": findings}


async def _page(request: Request) -> Response:
    # the header carries the policy whole; a <meta> one may not hold frame-ancestors
    meta = "; ".join(part for part in CSP.split("; ") if not part.startswith("frame-ancestors"))
    return Response(live_page(meta), media_type="text/html; charset=utf-8")


async def _icon(request: Request) -> Response:
    return Response(status_code=204)


async def _files(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in ASSETS:
        return _json({"error": "no such file"}, 404)
    return Response(asset(name), media_type=f"{ASSETS[name]}; charset=utf-8")


async def _abandoned(request: Request, exc: Exception) -> Response:
    return _json({"error": "the page went away before the answer was ready"}, 503)


async def _unknown(request: Request, exc: Exception) -> Response:
    return _json({"error": "no such capture"}, 404)


async def _bad(request: Request, exc: Exception) -> Response:
    return _json({"error": str(exc)}, 400)


def _listing_routes(inspector: Inspector) -> list[Route]:
    """The captures, and a capture's messages and rows (long polls)."""

    async def captures(request: Request) -> Response:
        return _json(await inspector.call(inspector.listing))

    async def messages(request: Request) -> Response:
        name = request.path_params["name"]
        after = int(_number(request, "after", 0, low=-1, high=2**62))
        wait = _number(request, "wait", 0, low=0, high=MAX_WAIT)
        limit = int(_number(request, "limit", MESSAGES_LIMIT, low=1, high=MESSAGES_LIMIT))
        deadline = trio.current_time() + wait
        while True:
            found = await inspector.call(inspector.messages, name, after, limit)
            if found or trio.current_time() >= deadline:
                return _json(found)
            await inspector.wait_growth(deadline - trio.current_time())

    async def rows(request: Request) -> Response:
        """A page of rows from index `after`. A long poll ends when there are rows, when the
        row still folding has grown past `seen` (the last seq the page holds of it), or when
        the capture is of another generation than `generation`."""
        name = request.path_params["name"]
        after = int(_number(request, "after", 0, low=0, high=2**62))
        wait = _number(request, "wait", 0, low=0, high=MAX_WAIT)
        seen = int(_number(request, "seen", 0, low=0, high=2**62))
        known = request.query_params.get("generation")
        deadline = trio.current_time() + wait
        while True:
            found = await inspector.call(inspector.timelines.rows, name, after, ROWS_LIMIT)
            pending = found["pending"]
            news = (found["rows"] or found["total"] < after
                    or (pending is not None and pending.get("s2", pending.get("s")) != seen)
                    or (known is not None and known != str(found["generation"])))
            if news or trio.current_time() >= deadline:
                return _json(found)
            await inspector.wait_growth(deadline - trio.current_time())

    return [
        Route("/api/captures", captures, methods=["GET"]),
        Route("/api/captures/{name:capture}/messages", messages, methods=["GET"]),
        Route("/api/captures/{name:capture}/rows", rows, methods=["GET"]),
    ]


def _report_routes(inspector: Inspector) -> list[Route]:
    """A capture's `stats` and `findings`."""

    async def report(request: Request, kind: str) -> Response:
        """A capture's `stats` or `findings`: a whole read of it (seconds for a big one),
        given up if the page goes away meanwhile (its request is cancelled: the connection
        closes), so that the capture it moved to is not kept waiting behind it."""
        gone = threading.Event()

        async def watch() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass
            gone.set()

        data: Json = {}
        failure: Exception | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            try:
                data = await inspector.call(inspector.report, request.path_params["name"], kind, gone)
            except Exception as exc:  # raised below, alone, for the handlers (not in a nursery's group)
                failure = exc
            nursery.cancel_scope.cancel()
        if failure is not None:
            raise failure
        return _json(data)

    async def stats(request: Request) -> Response:
        return await report(request, "stats")

    async def findings(request: Request) -> Response:
        return await report(request, "findings")

    return [
        Route("/api/captures/{name:capture}/stats", stats, methods=["GET"]),
        Route("/api/captures/{name:capture}/findings", findings, methods=["GET"]),
    ]


def build_app(inspector: Inspector, *, token: str, host: str, port: int, loopback: bool,
              every_address: bool = False) -> Guard:
    """The ASGI app: the routes behind the guard (`every_address`: bound to 0.0.0.0 or ::)."""
    routes = [
        Route("/", _page, methods=["GET"]),
        Route("/assets/{name}", _files, methods=["GET"]),
        Route("/favicon.ico", _icon, methods=["GET"]),
        *_listing_routes(inspector),
        *_report_routes(inspector),
    ]
    app = Starlette(routes=routes, exception_handlers={UnknownCapture: _unknown, BadQuery: _bad, Abandoned: _abandoned})
    return Guard(app, token=token, host=host, port=port, loopback=loopback, every_address=every_address)
