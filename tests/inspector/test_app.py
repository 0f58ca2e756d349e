"""`acp-bridge ui` through real HTTP: a server on a free port (Hypercorn's trio worker, as
the command runs it), asked by httpx. Every API name, and every refusal of the door."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import orjson
import pytest
import trio
from click.testing import CliRunner

from acp_bridge.capture.catalog import Capture, UnknownCapture
from acp_bridge.capture.stats import stats_json
from acp_bridge.capture.summary import utc_clock
from acp_bridge.commands import main
from acp_bridge.health.offline import findings_json
from acp_bridge.inspector.app import GONE_EVERY, MESSAGES_BYTES, Abandoned, Inspector
from acp_bridge.inspector.server import address, bind, serve
from acp_bridge.inspector.timeline import ROWS_BYTES
from tests.capture.hostile import PEAK_OF_SERVER, holds_a_secret, hostile_captures, one_huge_line
from tests.inspector.helpers import chunk, header, message

TOKEN = "test-token-0123456789abcdefghijklmnop"


@dataclass
class Server:
    client: httpx.AsyncClient
    port: int

    async def get(self, path: str, *, token: bool = True, **kw: Any) -> httpx.Response:
        params = dict(kw.pop("params", {}))
        if token:
            params["token"] = TOKEN
        return await self.client.get(path, params=params, **kw)

    async def json(self, path: str, **params: Any) -> Any:
        response = await self.get(path, params=params)
        assert response.status_code == 200, response.text
        return response.json()


@asynccontextmanager
async def running(*roots: Path, host: str = "127.0.0.1") -> AsyncIterator[Server]:
    sock = bind(host, 0)
    _, port = address(sock)
    stopped = trio.Event()
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(partial(serve, sock, [str(r) for r in roots], TOKEN, alive=lambda pid: pid == 4242,
                                        clock=utc_clock, stop=stopped.wait))
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                yield Server(client, port)
            stopped.set()


def records_of(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if b'"message"' in line]


async def test_every_api_name_answers_as_the_cli_does(tmp_path: Path) -> None:
    """/api/captures lists (newest first, live by pid); /messages serves records after a seq,
    bounded; /stats and /findings are `stats --json` and `check --json` for that capture."""
    (tmp_path / "old.jsonl").write_bytes(header(50.0, pid=1) + message(1) + b'{"type":"end","records":1}\n')
    (tmp_path / "new.jsonl").write_bytes(header(200.0) + b"".join(message(s) for s in range(1, 1201)))
    async with running(tmp_path) as server:
        listed = await server.json("/api/captures")
        assert [(c["name"], c["live"], c["messages"], c["client"], c["agent"], c["started"]) for c in listed] == [
            ("new.jsonl", True, 1200, None, None, 200.0), ("old.jsonl", False, 1, None, None, 50.0)]

        page = await server.json("/api/captures/new.jsonl/messages", after=5, limit=3)
        assert page == records_of(tmp_path / "new.jsonl")[5:8]
        page = await server.json("/api/captures/new.jsonl/messages", after=0, limit=10**9)
        assert [r["seq"] for r in page] == list(range(1, 1001))  # one answer holds 1000 at most
        assert await server.json("/api/captures/new.jsonl/messages", after=1200) == []

        for name in ("old.jsonl", "new.jsonl"):
            cli = CliRunner().invoke(main, ["stats", str(tmp_path / name), "--json"])
            assert await server.json(f"/api/captures/{name}/stats") == orjson.loads(cli.stdout)
            cli = CliRunner().invoke(main, ["check", str(tmp_path / name), "--json"])
            expected = orjson.loads(cli.stdout)["captures"][0]
            assert await server.json(f"/api/captures/{name}/findings") == {**expected, "path": name}

        assert (await server.get("/api/captures/new.jsonl/messages", params={"after": "x"})).status_code == 400
        assert (await server.get("/api/captures/none.jsonl/messages")).status_code == 404


async def test_names_with_a_folder_are_looked_up_not_joined(tmp_path: Path) -> None:
    """Two folders holding the same file name: the folder's name goes in front, slash and all."""
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "c.jsonl").write_bytes(header() + message(1, f'"{folder}"\n'))
    async with running(tmp_path / "a", tmp_path / "b") as server:
        assert sorted(c["name"] for c in await server.json("/api/captures")) == ["a/c.jsonl", "b/c.jsonl"]
        [record] = await server.json("/api/captures/b/c.jsonl/messages")
        assert record["raw"] == '"b"\n'


async def test_a_name_with_a_newline_or_controls_is_served_as_listed(tmp_path: Path) -> None:
    """A file name may hold a newline: the routes' `path` pattern (.*) stops at one, so the
    capture was listed and every API name of it answered 404 (the page never opened it)."""
    name = "a\nb\x15<i>.jsonl"
    (tmp_path / name).write_bytes(header() + message(1))
    async with running(tmp_path) as server:
        assert [c["name"] for c in await server.json("/api/captures")] == [name]
        base_url = "/api/captures/" + quote(name, safe="")
        assert [m["seq"] for m in await server.json(f"{base_url}/messages")] == [1]
        assert (await server.json(f"{base_url}/rows"))["messages"] == 1
        assert (await server.json(f"{base_url}/stats"))["messages"] == 1
        assert (await server.json(f"{base_url}/findings"))["path"] == name
        assert (await server.get(f"{base_url}x/rows")).json() == {"error": "no such capture"}


async def test_a_long_poll_holds_until_the_capture_grows(tmp_path: Path) -> None:
    """`wait=S`: an empty answer only after S seconds; a record appended meanwhile ends it."""
    capture = tmp_path / "c.jsonl"
    capture.write_bytes(header() + message(1))
    async with running(tmp_path) as server:
        start = trio.current_time()
        assert await server.json("/api/captures/c.jsonl/messages", after=1, wait=0.5) == []
        assert trio.current_time() - start >= 0.45
        got: list[Any] = []
        async with trio.open_nursery() as nursery:
            async def poll() -> None:
                got.append(await server.json("/api/captures/c.jsonl/messages", after=1, wait=15))
            nursery.start_soon(poll)
            with capture.open("ab") as file:
                file.write(message(2))
        assert [r["seq"] for r in got[0]] == [2]


async def test_a_torn_last_line_is_served_once_whole(tmp_path: Path) -> None:
    """A bridge writing its last line: the part written is no record yet."""
    capture = tmp_path / "c.jsonl"
    whole = message(2)
    capture.write_bytes(header() + message(1) + whole[:30])
    async with running(tmp_path) as server:
        assert [r["seq"] for r in await server.json("/api/captures/c.jsonl/messages")] == [1]
        with capture.open("ab") as file:
            file.write(whole[30:])
        got = await server.json("/api/captures/c.jsonl/messages", after=1, wait=10)
        assert got == [orjson.loads(whole)]


async def test_a_capture_cut_short_or_deleted_while_open_serves_no_old_record(tmp_path: Path) -> None:
    """Truncated and written again: only what it holds now; deleted: 404 everywhere."""
    capture = tmp_path / "c.jsonl"
    capture.write_bytes(header() + b"".join(message(s, f'"old {s}"\n') for s in range(1, 6)))
    async with running(tmp_path) as server:
        assert len(await server.json("/api/captures/c.jsonl/messages")) == 5
        rows = await server.json("/api/captures/c.jsonl/rows")
        with capture.open("r+b") as file:  # cut short in place, as `truncate -s 0` would
            file.truncate(0)
            file.write(header() + message(1, '"new 1"\n'))
        assert [r["raw"] for r in await server.json("/api/captures/c.jsonl/messages")] == ['"new 1"\n']
        assert await server.json("/api/captures/c.jsonl/messages", after=1) == []
        again = await server.json("/api/captures/c.jsonl/rows", generation=rows["generation"], wait=10)
        assert again["generation"] != rows["generation"]
        assert [r.get("b") for r in again["rows"] if "h" not in r] == ['"new 1"']
        os.unlink(capture)
        for path in ("messages", "rows", "stats", "findings"):
            assert (await server.get(f"/api/captures/c.jsonl/{path}")).status_code == 404, path
        assert await server.json("/api/captures") == []


async def test_a_page_of_rows_stops_at_its_bytes(tmp_path: Path) -> None:
    """A row keeps up to 20,000 characters of a message and of what went out instead: a page
    of 4000 such rows was one answer of 160 MB (a capture of big file reads), held whole.
    Now a page stops at ROWS_BYTES of them (at least one row); the rest comes after it."""
    big = '{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"p":"' + "x" * 30_000 + '"}}\n'
    (tmp_path / "c.jsonl").write_bytes(header() + b"".join(message(seq, big) for seq in range(1, 601)))
    async with running(tmp_path) as server:
        rows: list[Any] = []
        while True:
            response = await server.get("/api/captures/c.jsonl/rows", params={"after": len(rows)})
            page = response.json()
            assert len(response.content) < ROWS_BYTES + 100_000, len(rows)
            rows += page["rows"]
            if len(rows) >= page["total"]:
                break
        assert [row["s"] for row in rows if "h" not in row] == list(range(1, 601))


async def test_rows_hold_the_run_of_chunks_still_folding(tmp_path: Path) -> None:
    """The page's rows: a run of chunks comes as `pending`, grown at each chunk, until a
    message of another kind ends it."""
    capture = tmp_path / "c.jsonl"
    capture.write_bytes(header() + chunk(1, "Hel") + chunk(2, "lo"))
    async with running(tmp_path) as server:
        page = await server.json("/api/captures/c.jsonl/rows")
        assert [r.get("h") for r in page["rows"]] == ["outside"] and page["total"] == 1
        start = trio.current_time()
        held = await server.json("/api/captures/c.jsonl/rows", after=1, seen=2, wait=0.3)
        assert held == {**page, "start": 1, "rows": []} and trio.current_time() - start >= 0.25  # held: nothing new
        assert (page["pending"]["n"], page["pending"]["p"]) == (2, "Hello")
        with capture.open("ab") as file:
            file.write(chunk(3, ", world"))
        page = await server.json("/api/captures/c.jsonl/rows", after=1, seen=2, wait=10)
        assert page["rows"] == [] and (page["pending"]["n"], page["pending"]["p"]) == (3, "Hello, world")
        with capture.open("ab") as file:
            file.write(message(4))
        page = await server.json("/api/captures/c.jsonl/rows", after=1, seen=3, wait=10)
        assert [(r.get("h"), r.get("s"), r.get("n")) for r in page["rows"]] == [
            (None, 1, 3), ("turn", None, None), (None, 4, None)]  # the run ended, a turn began
        assert page["pending"] is None


# -- the door ------------------------------------------------------------------------------

async def test_every_refusal_of_the_door(tmp_path: Path) -> None:
    """Token, Host (DNS rebinding), Origin, methods: refused whatever the path, with the
    safe headers; the captures outside the catalog are not there at all."""
    root, outside = tmp_path / "captures", tmp_path / "elsewhere"
    root.mkdir()
    outside.mkdir()
    (root / "c.jsonl").write_bytes(header() + message(1))
    (outside / "secret.jsonl").write_bytes(header() + message(1, '"secret"\n'))
    (root / "out.jsonl").symlink_to(outside / "secret.jsonl")
    async with running(root) as server:
        bound = f"127.0.0.1:{server.port}"
        ok = await server.get("/api/captures/c.jsonl/messages")
        assert ok.status_code == 200
        refused = {
            "no token": await server.get("/", token=False),
            "no token, API": await server.get("/api/captures", token=False),
            "no token, unknown path": await server.get("/nothing", token=False),
            "wrong token": await server.get("/api/captures", token=False, params={"token": TOKEN[:-1] + "X"}),
            "wrong cookie": await server.get("/api/captures", token=False,
                                             headers={"cookie": f"acp_bridge_ui_{server.port}=nope"}),
            "rebound host": await server.get("/api/captures", headers={"host": f"evil.example:{server.port}"}),
            "other port": await server.get("/api/captures", headers={"host": "127.0.0.1:1"}),
            "foreign origin": await server.get("/api/captures", headers={"origin": "http://evil.example"}),
            "cross-site fetch": await server.get("/api/captures", headers={"sec-fetch-site": "cross-site"}),
            # a page on another port of this machine: same site, so the Strict cookie goes with it
            "same-site fetch": await server.get("/api/captures", headers={"sec-fetch-site": "same-site"}),
            "POST": await server.client.post("/api/captures", params={"token": TOKEN}),
            "DELETE": await server.client.delete("/api/captures/c.jsonl/messages", params={"token": TOKEN}),
            "dot-dot": await server.get("/api/captures/..%2Felsewhere%2Fsecret.jsonl/messages"),
            "dot-dot raw": await server.client.send(httpx.Request(
                "GET", f"http://{bound}/api/captures/../elsewhere/secret.jsonl/messages?token={TOKEN}")),
            "link leading out": await server.get("/api/captures/out.jsonl/messages"),
            "an asset not listed": await server.get("/assets/..%2F..%2Fcatalog.py"),
        }
        statuses = {why: r.status_code for why, r in refused.items()}
        assert statuses == {
            "no token": 401, "no token, API": 401, "no token, unknown path": 401, "wrong token": 401,
            "wrong cookie": 401, "rebound host": 421, "other port": 421, "foreign origin": 403,
            "cross-site fetch": 403, "same-site fetch": 403, "POST": 405, "DELETE": 405, "dot-dot": 404, "dot-dot raw": 404,
            "link leading out": 404, "an asset not listed": 404,
        }
        assert all(b"secret" not in r.content for r in refused.values())
        assert all(r.headers["content-security-policy"].startswith("default-src 'none'") for r in refused.values())
        assert [c["name"] for c in await server.json("/api/captures")] == ["c.jsonl"]
        same = await server.get("/api/captures", headers={"origin": f"http://{bound}"})
        assert same.status_code == 200
        head = await server.client.head("/api/captures/c.jsonl/stats", params={"token": TOKEN})
        assert head.status_code == 200 and head.content == b""  # HEAD is a GET without the body


async def test_bound_to_every_address_any_address_of_it_is_a_host(tmp_path: Path) -> None:
    """`--host 0.0.0.0` is for a page opened from another machine, at this one's address:
    that Host was refused (421), the bound 0.0.0.0 being the only one allowed. An address is
    no name DNS can rebind, so any IP address with the port will do; a name still will not,
    and an Origin must be the page's own."""
    (tmp_path / "c.jsonl").write_bytes(header() + message(1))
    async with running(tmp_path, host="0.0.0.0") as server:
        port = server.port
        hosts = {host: (await server.get("/api/captures", headers={"host": host})).status_code for host in (
            f"192.168.1.7:{port}", f"127.0.0.1:{port}", f"0.0.0.0:{port}", f"localhost:{port}", f"[::1]:{port}",
            f"evil.example:{port}", f"192.168.1.7:{port + 1}", "192.168.1.7", f"::1:{port}", f"[evil]:{port}")}
        assert hosts == {
            f"192.168.1.7:{port}": 200, f"127.0.0.1:{port}": 200, f"0.0.0.0:{port}": 200, f"localhost:{port}": 200,
            f"[::1]:{port}": 200, f"evil.example:{port}": 421, f"192.168.1.7:{port + 1}": 421, "192.168.1.7": 421,
            f"::1:{port}": 421, f"[evil]:{port}": 421}
        origins = {origin: (await server.get("/api/captures", headers={
            "host": f"192.168.1.7:{port}", "origin": origin})).status_code for origin in (
            f"http://192.168.1.7:{port}", f"http://0.0.0.0:{port}", "http://evil.example")}
        assert origins == {f"http://192.168.1.7:{port}": 200, f"http://0.0.0.0:{port}": 403, "http://evil.example": 403}


async def test_the_first_visit_moves_the_token_into_a_strict_cookie(tmp_path: Path) -> None:
    """`/?token=` answers with the cookie (HttpOnly, SameSite=Strict) and sends the browser
    to `/`, so the token leaves the address bar; the cookie alone then opens everything.
    The page loads nothing but its own files, and says so in its policy."""
    async with running(tmp_path) as server:
        first = await server.get("/")
        assert first.status_code == 303 and first.headers["location"] == "/"
        assert first.headers["set-cookie"] == (f"acp_bridge_ui_{server.port}={TOKEN}; HttpOnly; SameSite=Strict; "
                                               "Path=/")
        cookie = {"cookie": f"acp_bridge_ui_{server.port}={TOKEN}"}
        page = await server.get("/", token=False, headers=cookie)
        assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
        csp = page.headers["content-security-policy"]
        assert csp.startswith("default-src 'none'; script-src 'self'; ") and "connect-src 'self'" in csp
        assert "http://" not in page.text and "https://" not in page.text
        assert '<script src="/assets/page.js"></script>' in page.text
        for name in ("page.js", "live.js", "page.css"):
            served = await server.get(f"/assets/{name}", token=False, headers=cookie)
            assert served.status_code == 200 and "http://" not in served.text and "https://" not in served.text
        assert (await server.get("/api/captures", token=False, headers=cookie)).json() == []


def test_without_the_extra_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "starlette", None)
    result = CliRunner().invoke(main, ["ui", "."])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == ("acp-bridge: the inspector needs the ui extra: pip install 'acp-bridge-proxy[ui]' "
                             "(in a clone: pip install '.[ui]')\n")


def test_beyond_loopback_a_warning(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The address is stdout's one line; a host that is not loopback is warned about."""
    import trio as trio_module

    monkeypatch.setattr(trio_module, "run", lambda *a, **k: None)
    result = CliRunner().invoke(main, ["ui", str(tmp_path), "--host", "0.0.0.0"])
    assert result.exit_code == 0, result.output
    [line] = result.stdout.splitlines()
    assert line.startswith("http://0.0.0.0:") and "/?token=" in line
    assert result.stderr == ("acp-bridge: warning: listening on 0.0.0.0, beyond this machine: anyone who can reach "
                             "it and learns the token reads your captures\nacp-bridge: from another machine, open the "
                             "address with this machine's IP address in place of 0.0.0.0\n")
    result = CliRunner().invoke(main, ["ui", str(tmp_path)])
    assert result.stdout.startswith("http://127.0.0.1:") and result.stderr == ""


async def test_the_command_prints_its_address_alone_and_ends_clean_on_ctrl_c(tmp_path: Path) -> None:
    """`acp-bridge ui DIR` as a user runs it: the address, token included, is stdout's one
    line (flushed before anything is asked); the API answers there; SIGINT ends it with 0."""
    (tmp_path / "c.jsonl").write_bytes(header() + message(1))
    proc = await trio.lowlevel.open_process([sys.executable, "-m", "acp_bridge", "ui", str(tmp_path)],
                                            stdout=subprocess.PIPE)
    assert proc.stdout is not None
    try:
        with trio.fail_after(30):
            line = b""
            while not line.endswith(b"\n"):
                line += await proc.stdout.receive_some(1)
            url = line.decode().strip()
            assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[\w-]{43}", url), url
            async with httpx.AsyncClient() as client:
                answer = await client.get(url.replace("/?", "/api/captures?"))
            assert [c["name"] for c in answer.json()] == ["c.jsonl"]
            proc.send_signal(signal.SIGINT)
            assert await proc.wait() == 0
            assert await proc.stdout.receive_some() == b""
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await proc.stdout.aclose()


def test_stats_and_findings_come_of_one_read_until_the_capture_grows(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The page asks for both at once; a 200,000-message capture was read and parsed twice."""
    capture = tmp_path / "c.jsonl"
    capture.write_bytes(header() + b"".join(message(s) for s in range(1, 4)))
    inspector = Inspector([str(tmp_path)], alive=lambda pid: True, clock=utc_clock)
    reads: list[str] = []
    everything = inspector.catalog.everything

    def counted(capture: Capture) -> Iterator[dict[str, Any]]:
        reads.append(capture.name)
        return everything(capture)

    monkeypatch.setattr(inspector.catalog, "everything", counted)
    inspector.listing()
    stats, findings = inspector.report("c.jsonl", "stats"), inspector.report("c.jsonl", "findings")
    assert reads == ["c.jsonl"] and inspector.report("c.jsonl", "stats") is stats
    records = list(everything(inspector.catalog.get("c.jsonl")))
    assert stats == stats_json(records) and findings == findings_json("c.jsonl", records)
    with capture.open("ab") as file:
        file.write(message(4))
    assert inspector.report("c.jsonl", "findings")["messages"] == 4 and reads == ["c.jsonl"] * 2
    assert inspector.report("c.jsonl", "stats")["messages"] == 4 and reads == ["c.jsonl"] * 2


def test_stats_and_findings_stop_reading_when_the_page_is_gone(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A page that moves to another capture no longer wants the report it asked for: the
    read stops within GONE_EVERY records of the signal, nothing is kept, and the next asker
    gets the whole report."""
    total = 5 * GONE_EVERY
    (tmp_path / "c.jsonl").write_bytes(header() + b"".join(message(s) for s in range(1, total + 1)))
    inspector = Inspector([str(tmp_path)], alive=lambda pid: True, clock=utc_clock)
    inspector.listing()
    gone, read = threading.Event(), []
    everything = inspector.catalog.everything

    def reading(capture: Capture) -> Iterator[dict[str, Any]]:
        for record in everything(capture):
            read.append(record.get("seq"))
            if len(read) == 2 * GONE_EVERY:
                gone.set()  # the page went away here
            yield record

    monkeypatch.setattr(inspector.catalog, "everything", reading)
    with pytest.raises(Abandoned):
        inspector.report("c.jsonl", "stats", gone)
    assert 2 * GONE_EVERY <= len(read) <= 3 * GONE_EVERY + 1 and inspector._reports == {}
    read.clear()
    assert inspector.report("c.jsonl", "findings", threading.Event())["messages"] == total
    assert len(read) == total + 1  # and the header

async def test_a_report_is_given_up_when_its_connection_closes(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's fetch is aborted (the connection closes) while the report is read: the
    reading is told so; an asker that waits gets its answer."""
    (tmp_path / "c.jsonl").write_bytes(header() + message(1))
    told: list[bool] = []
    asked = threading.Event()
    real = Inspector.report

    def report(self: Inspector, name: str, kind: str, gone: threading.Event | None = None) -> Any:
        asked.set()
        if name == "c.jsonl" and kind == "stats" and gone is not None:
            told.append(gone.wait(20))  # as a long read would look at it
            raise Abandoned(name)
        return real(self, name, kind, gone)

    monkeypatch.setattr(Inspector, "report", report)
    async with running(tmp_path) as server:
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        await stream.send_all(f"GET /api/captures/c.jsonl/stats?token={TOKEN} HTTP/1.1\r\n"
                              f"Host: 127.0.0.1:{server.port}\r\n\r\n".encode())
        await trio.to_thread.run_sync(asked.wait, 20)
        await stream.aclose()
        assert (await server.json("/api/captures/c.jsonl/findings"))["messages"] == 1  # after the stats gave up
    assert told == [True]


def test_a_folder_swapped_for_a_link_after_listing_is_not_served(tmp_path: Path) -> None:
    """While a page polls, the served folder is swapped for a link: the next open is
    refused (the capture is gone), never followed to the outside capture."""
    served, outside = tmp_path / "served", tmp_path / "outside"
    served.mkdir()
    outside.mkdir()
    (served / "c.jsonl").write_bytes(header() + message(1))
    (outside / "c.jsonl").write_bytes(header() + message(1, '{"secret":"outside"}\n'))
    inspector = Inspector([str(served)], alive=lambda pid: False, clock=utc_clock)
    assert [c["name"] for c in inspector.listing()] == ["c.jsonl"]
    assert len(inspector.messages("c.jsonl", 0, 10)) == 1
    served.rename(tmp_path / "served.old")
    served.symlink_to(outside)
    with pytest.raises(UnknownCapture):
        inspector.messages("c.jsonl", 0, 10)
    with pytest.raises(UnknownCapture):
        inspector.timelines.rows("c.jsonl", 0, 10)


async def test_every_api_serves_messages_masked_as_the_export_shows_them(tmp_path: Path) -> None:
    """The messages API served MCP env values, auth params and header values in clear that
    the page's rows and `export --html` mask again: every answer now masks them the one way
    (`masking.mask_record`), on the export's own hostile samples."""
    hostile = hostile_captures(tmp_path)
    async with running(tmp_path) as server:
        for capture in hostile:
            base_url = f"/api/captures/{capture.name}"
            served = await server.json(f"{base_url}/messages")
            assert served == orjson.loads(orjson.dumps(capture.shown))
            for kind in ("rows", "stats", "findings"):
                assert not holds_a_secret(await server.json(f"{base_url}/{kind}")), kind


HUGE = 100 * 1000 * 1000  # the line of the report: the inspector grew to 555 MiB on it
BIG, MANY = 2 * 1000 * 1000, 10  # lines under the limit, together far over an answer's bytes


def test_one_huge_line_is_passed_over_and_the_inspector_stays_small(tmp_path: Path) -> None:
    """A capture with one 100 MB line, through every API name of the real command: the line
    is over the servers' limit (64 MiB), so it is passed over unread and counted; what is
    around it is served; the process stays far below the line's size (348 MiB for the
    listing alone, 555 MiB in all, before). Beside it, 10 lines of 2 MB, each under the
    limit: the rows were built from 5000 records held at once, and a page of the messages
    API held 1000 (the server grew by all 20 MB, twice; with lines of 60 MB, by 60 GB); now
    one record at a time, and a page of messages stops at MESSAGES_BYTES (the rest: after)."""
    folder = tmp_path / "captures"
    folder.mkdir()
    one_huge_line(folder / "huge.jsonl", HUGE)
    big = '{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"p":"' + "x" * BIG + '"}}\n'
    (folder / "many.jsonl").write_bytes(header(50.0) + b"".join(message(seq, big) for seq in range(1, MANY + 1)))
    peak = tmp_path / "peak"
    with subprocess.Popen([sys.executable, "-c", PEAK_OF_SERVER, str(peak), sys.executable, "-m", "acp_bridge",
                           "ui", str(folder)], stdout=subprocess.PIPE) as proc:
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().decode().strip()
            base, token = url.split("/?token=")
            with httpx.Client(base_url=base, params={"token": token}, timeout=60) as client:
                listed, _ = client.get("/api/captures").json()
                assert (listed["name"], listed["messages"], listed["skipped"]) == ("huge.jsonl", 2, 1)
                assert [m["seq"] for m in client.get("/api/captures/huge.jsonl/messages").json()] == [2, 3]
                for kind in ("rows", "stats", "findings"):
                    assert client.get(f"/api/captures/huge.jsonl/{kind}").status_code == 200, kind
                assert len(client.get("/api/captures/many.jsonl/rows").json()["rows"]) == 2 * MANY  # a turn each
                seqs: list[int] = []
                while len(seqs) < MANY:
                    page = client.get("/api/captures/many.jsonl/messages", params={"after": seqs[-1] if seqs else 0})
                    seqs += [m["seq"] for m in page.json()]
                    assert len(page.content) < MESSAGES_BYTES + 2 * BIG
                assert seqs == list(range(1, MANY + 1))
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
        finally:
            proc.kill()
    assert int(peak.read_text()) / 1024 < 100, int(peak.read_text()) / 1024


async def test_a_failed_rule_and_an_id_past_64_bits_are_findings_served_as_written(tmp_path: Path) -> None:
    """A rule's error is an error finding with its count, and the verdict keeps the bridge; a
    response for a 100-digit id nobody asked names it with all its digits (orjson cannot
    write such an integer: the answer is still JSON, not a server error)."""
    big = "9" * 100
    raw = f'{{"jsonrpc":"2.0","id":{big},"result":{{}}}}\n'
    unknown = (b'{"type":"message","seq":3,"time":103.0,"mono":3.0,"direction":"to-client","kind":"response",'
               b'"verdict":"pass","method":null,"id":' + big.encode() + b',"session":null,"rules":[],"size":'
               + str(len(raw)).encode() + b',"raw":' + orjson.dumps(raw) + b"}\n")
    failed = b"".join(message(seq, f'{{"jsonrpc":"2.0","id":{seq},"method":"session/prompt"}}\n', verdict="error",
                              rules=["boom"], error="ValueError: kaboom") for seq in (1, 2))
    (tmp_path / "c.jsonl").write_bytes(header() + failed + unknown)
    async with running(tmp_path) as server:
        response = await server.get("/api/captures/c.jsonl/findings")
        assert response.status_code == 200
        assert f'"id":{big}}}' in response.text
        report = response.json()
        assert [(f["code"], f["level"], f["count"], [o["seq"] for o in f["occurrences"]])
                for f in report["findings"]] == [("response-unknown-id", "error", 1, [3]),
                                                 ("rule-failed", "error", 2, [1])]
        assert report["verdict"].startswith("rules failed (boom 2x)")
        assert (await server.get("/api/captures/c.jsonl/messages")).status_code == 200
