"""`acp-bridge ui` in a real browser: Debian's headless Chromium driven by Selenium (with
chromedriver; the suite's one browser, tests/browser.py), against the real command.

The inspector's page is the export's page (one renderer), so the 200,000-message test here
is the one that covers both: rows drawn on demand, a jump far down, a filter over all.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.big_capture import write_capture
from tests.browser import CHROMIUM, DRIVER, Browser, needs_browser
from tests.conftest import ROOT, SCRIPTED_AGENT
from tests.inspector.helpers import chunk, header, message

pytestmark = needs_browser("the inspector")

if CHROMIUM is not None and DRIVER is not None:
    from selenium.webdriver.common.by import By


class Inspector:
    """The real `acp-bridge ui` over one folder, in the suite's browser."""

    def __init__(self, folder: Path, proc: subprocess.Popen[bytes], url: str, browser: Browser) -> None:
        self.folder, self.proc, self.url, self.browser = folder, proc, url, browser
        self.driver, self.wait, self.js, self.body = browser.driver, browser.wait, browser.js, browser.body
        self.base = url.split("?", maxsplit=1)[0]

    def open(self, capture: str = "", extra: str = "") -> None:
        """The page loaded afresh, with `capture` chosen."""
        self.browser.load(self.base + "#" + (f"c={capture}" if capture else "") + extra)

    def rows(self) -> str:
        return str(self.js("return document.getElementById('list').innerHTML"))

    def listed(self, name: str) -> str:
        return str(self.js("var tr=document.querySelector('tr.cap[data-name=\"'+arguments[0]+'\"]');"
                           "return tr?tr.textContent:''", name))


@pytest.fixture(scope="module")
def inspector(tmp_path_factory: pytest.TempPathFactory, browser: Browser) -> Iterator[Inspector]:
    folder = tmp_path_factory.mktemp("captures")
    proc = subprocess.Popen([sys.executable, "-m", "acp_bridge", "ui", str(folder)], stdout=subprocess.PIPE,
                            cwd=ROOT)
    assert proc.stdout is not None
    try:
        url = proc.stdout.readline().decode().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[\w-]{43}", url), url
        browser.driver.get(url)  # the first visit: the token becomes the cookie
        yield Inspector(folder, proc, url, browser)
    finally:
        try:
            browser.driver.get("about:blank")  # the page's requests (a long poll among them) end
        finally:
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=20) == 0  # Ctrl-C is a clean end
            assert proc.stdout.read() == b""  # the address was stdout's one line
            proc.stdout.close()


def test_the_list_newest_first_with_the_live_ones_marked(inspector: Inspector) -> None:
    """20 captures whose bridges run (LIVE), one that ended; newest first, a new one appears."""
    folder = inspector.folder
    hostile = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "clientInfo": {"name": "<img src=x onerror=alert(1)>", "version": "\u001b[31m"}}}).decode() + "\n"
    (folder / "ended.jsonl").write_bytes(header(10.0, pid=os.getpid()) + message(1, hostile, method="initialize")
                                        + b'{"type":"end"}\n')
    for n in range(20):
        (folder / f"live-{n:02}.jsonl").write_bytes(header(100.0 + n, pid=os.getpid()) + message(1))
    inspector.open()
    inspector.wait(lambda: inspector.body("data-captures") == "21")
    # Each read in one step: the page redraws the list as it polls, so an element found in
    # one call may be gone by the next.
    listing = ("var n=document.getElementById('captures');"
               "return [[...n.querySelectorAll('tr.cap')].map(t=>[t.dataset.name,t.textContent]),"
               "n.querySelectorAll('.live-badge').length,n.querySelectorAll('img').length]")
    names, badges, images = inspector.js(listing)
    assert [name for name, _ in names] == [f"live-{n:02}.jsonl" for n in range(19, -1, -1)] + ["ended.jsonl"]
    assert (badges, images) == (20, 0)
    assert "<img src=x onerror=alert(1)> \x1b[31m" in inspector.listed("ended.jsonl")  # text, not markup
    (folder / "newest.jsonl").write_bytes(header(1000.0, pid=1 << 30) + message(1))  # no such process
    inspector.wait(lambda: inspector.body("data-captures") == "22")  # without reloading
    first, text = inspector.js(listing)[0][0]
    assert first == "newest.jsonl" and "LIVE" not in text


def test_a_capture_grows_while_a_real_bridge_writes_it(inspector: Inspector, tmp_path: Path) -> None:
    """`acp-bridge run --capture` with a scripted agent: each message the editor and the agent
    exchange appears as a row without reloading; a click shows the tree and the raw text."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"on": {
        "initialize": [{"respond": {"protocolVersion": 1, "agentInfo": {"name": "scripted", "version": "1.2"}}}],
        "session/new": [{"respond": {"sessionId": "sess_live"}}],
    }}))
    capture = inspector.folder / "bridge.jsonl"
    bridge = subprocess.Popen(
        [sys.executable, "-m", "acp_bridge", "run", "--capture", str(capture), "--",
         sys.executable, "-u", str(SCRIPTED_AGENT), str(script)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
    assert bridge.stdin is not None and bridge.stdout is not None
    try:
        def send(msg: dict[str, Any]) -> bytes:
            assert bridge.stdin is not None and bridge.stdout is not None
            bridge.stdin.write(orjson.dumps(msg) + b"\n")
            bridge.stdin.flush()
            return bridge.stdout.readline()

        send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": 1, "clientInfo": {"name": "browser-test", "version": "9"}}})
        inspector.open("bridge.jsonl")
        inspector.wait(lambda: "initialize id 0 ok" in inspector.rows())
        inspector.wait(lambda: all(text in inspector.listed("bridge.jsonl") for text in
                                   ("LIVE", "browser-test 9", "scripted 1.2")))
        assert "session/new" not in inspector.rows()

        send({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/w", "mcpServers": []}})
        inspector.wait(lambda: "sessionId: sess_live" in inspector.rows())  # the answer's row, no reload
        assert inspector.body("data-visible") == "4"

        find = ("var b=[].filter.call(document.querySelectorAll('#list .msg b'),"
                "function(b){return b.textContent==='session/new id 1';})[0];return b&&b.closest('.msg');")
        inspector.js(find[:-1] + ".querySelector('.sum').click()")
        summaries = inspector.wait(lambda: inspector.js(
            "return [].map.call(document.querySelectorAll('#pane .tree summary'),function(s){return s.textContent;});"))
        assert summaries == ["{4}", "params: {2}"]  # an empty list is a leaf, not a branch
        raw = inspector.js("return document.querySelector('#pane pre.rawline').textContent")
        assert raw == '{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}'
    finally:
        bridge.stdin.close()
        assert bridge.wait(timeout=20) == 0
        bridge.stdout.close()
    inspector.wait(lambda: "LIVE" not in inspector.listed("bridge.jsonl"))  # its bridge ended


def test_chunks_fold_into_one_row_that_grows_and_a_filter(inspector: Inspector) -> None:
    """A run of chunks is one row whose preview grows as they come; the filters of `show`."""
    capture = inspector.folder / "fold.jsonl"
    capture.write_bytes(header(5.0) + message(1) + chunk(2, "Hel"))
    inspector.open("fold.jsonl")
    inspector.wait(lambda: '<span class="pv">Hel</span>' in inspector.rows())
    with capture.open("ab") as file:
        file.write(chunk(3, "lo, wor"))
    inspector.wait(lambda: "agent_message_chunk ×2" in inspector.rows())
    with capture.open("ab") as file:
        file.write(chunk(4, "ld"))
    inspector.wait(lambda: '<span class="pv">Hello, world</span>' in inspector.rows())
    assert inspector.rows().count("agent_message_chunk") == 1 and "×3" in inspector.rows()
    assert inspector.body("data-visible") == "4"

    box = inspector.driver.find_element(By.ID, "q")
    box.send_keys("method:session/update")
    inspector.wait(lambda: inspector.body("data-visible") == "3")
    box.clear()
    box.send_keys("dir:-> world")
    inspector.wait(lambda: inspector.body("data-visible") == "0")
    box.clear()
    box.send_keys("update:agent_message_chunk world")
    inspector.wait(lambda: inspector.body("data-visible") == "3")


def pane(inspector: Inspector) -> Any:
    """What the detail pane shows, read in one step: the seq it holds, its title, its links,
    its tree's branches, its raw line, its folded members."""
    return inspector.js(
        "var p=document.getElementById('pane');if(p.hidden)return null;"
        "var t=function(s){return [].map.call(p.querySelectorAll(s),function(e){return e.textContent;});};"
        "return {seq:document.body.getAttribute('data-pane'),title:p.querySelector('.ph b').textContent,"
        "links:t('.pair'),tree:t('.tree summary'),raw:t('pre.rawline'),members:t('.member .pv')};")


def key(inspector: Inspector, name: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(inspector.driver).send_keys(name).perform()


def test_the_detail_pane_keys_and_folded_members(inspector: Inspector) -> None:
    """A click opens the message beside the list (its JSON, raw line, and the other half of
    its request/response pair, one click away); Enter opens, Escape closes, the arrow keys
    move the selection, `/` goes to the filter; a run of chunks unfolds into its messages,
    fetched from the API; the copy buttons copy what they say."""
    from selenium.webdriver.common.keys import Keys

    new = '{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w"}}\n'
    answer = '{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}\n'
    (inspector.folder / "pane.jsonl").write_bytes(
        header(7.0) + message(1, new, method="session/new", id=1)
        + message(2, answer, method="session/new", id=1, kind="response", direction="to-client", latency=0.25)
        + chunk(3, "Hel") + chunk(4, "lo, wor") + chunk(5, "ld"))
    inspector.open("pane.jsonl")
    inspector.wait(lambda: inspector.body("data-live-ready") == "1")
    assert pane(inspector) is None
    inspector.js("document.querySelector('#m1 .sum').click()")
    shown = inspector.wait(lambda: pane(inspector))
    assert shown == {"seq": "1", "title": "session/new id 1", "links": ["response: seq 2 session/new id 1 ok 250.0ms"],
                     "tree": ["{4}", "params: {1}"], "raw": [new.strip()], "members": []}
    assert inspector.js("return document.body.classList.contains('paned')&&"
                        "document.getElementById('list').getBoundingClientRect().right<="
                        "document.getElementById('pane').getBoundingClientRect().left")  # beside, not over
    assert inspector.js("return document.querySelector('#m1').offsetHeight") < 30  # the row did not open inline
    inspector.js("document.querySelector('#pane .pair a.jump').click()")  # to the answer, and back
    assert inspector.wait(lambda: (pane(inspector) or {}).get("seq") == "2")
    assert pane(inspector)["links"] == ["request: seq 1 session/new id 1"]

    inspector.js("document.querySelector('#pane button[data-act=raw]').click()")
    assert inspector.body("data-copied") == answer.strip()
    inspector.js("document.querySelector('#pane button[data-act=show]').click()")
    assert inspector.body("data-copied") == "acp-bridge show pane.jsonl --seq 2 --detail 3"  # this message

    key(inspector, Keys.ESCAPE)
    assert inspector.wait(lambda: pane(inspector) is None)
    key(inspector, Keys.ARROW_DOWN)  # from seq 2 to the folded row, selected, the pane still closed
    assert inspector.wait(lambda: inspector.body("data-sel") == "3") and pane(inspector) is None
    assert inspector.js("return document.querySelector('[aria-selected=true]').id") == "m3"
    key(inspector, Keys.ENTER)
    shown = inspector.wait(lambda: (pane(inspector) or {}).get("members") and pane(inspector))
    assert shown["title"] == "session/update agent_message_chunk ×3"
    assert shown["members"] == ["Hel", "lo, wor", "ld"]  # unfolded: its three messages
    inspector.js("document.querySelector('#pane button[data-act=show]').click()")
    assert inspector.body("data-copied") == ("acp-bridge show pane.jsonl --detail 3 --direction to-client --method "
                                             "session/update --update agent_message_chunk   # from seq 3")
    key(inspector, Keys.ARROW_UP)
    key(inspector, Keys.ARROW_UP)
    assert inspector.wait(lambda: (pane(inspector) or {}).get("seq") == "1")  # the open pane follows
    key(inspector, "/")
    assert inspector.js("return document.activeElement.id") == "q"
    key(inspector, "sessionId")
    assert inspector.wait(lambda: inspector.body("data-visible") == "1")


def test_pause_holds_new_rows_until_resume(inspector: Inspector) -> None:
    """Paused, the rows that come are fetched but not shown; resumed, they appear."""
    capture = inspector.folder / "paused.jsonl"
    capture.write_bytes(header(8.0) + message(1))
    inspector.open("paused.jsonl")
    inspector.wait(lambda: inspector.body("data-visible") == "1")
    inspector.js("document.getElementById('pause').click()")
    assert inspector.body("data-paused") == "1"
    with capture.open("ab") as file:
        file.write(message(2) + message(3))
    inspector.wait(lambda: inspector.body("data-held") == "4")  # has them (two turns: 4 rows), and holds them
    assert inspector.body("data-visible") == "1" and "session/prompt id 3" not in inspector.rows()
    inspector.js("document.getElementById('pause').click()")
    assert inspector.wait(lambda: inspector.body("data-visible") == "3")
    assert inspector.body("data-paused") == "0"


def test_one_time_format_and_a_list_that_folds(inspector: Inspector) -> None:
    """Times read one way everywhere (local date and HH:MM:SS.mmm, the ISO UTC time as the
    tooltip); the list of captures folds to one line, and stays folded across a reload."""
    (inspector.folder / "times.jsonl").write_bytes(orjson.dumps({
        "type": "header", "format": 1, "time": 1796531664.25, "mono": 0, "pid": 1 << 30, "bridge": "0.1.0",
        "started": "2026-12-06T04:34:24Z", "config": "c"}) + b"\n" + message(1))
    inspector.open("times.jsonl")
    inspector.wait(lambda: inspector.body("data-visible") == "1")
    listed, meta = inspector.wait(lambda: inspector.js(
        "var c=document.querySelector('tr.cap[data-name=\"times.jsonl\"] .ts'),m=document.querySelector('#meta .ts');"
        "return c&&m&&[[c.textContent,c.title],[m.textContent,m.title]]"))
    assert listed[1] == "2026-12-06T04:34:24.250Z" and meta[1] == "2026-12-06T04:34:24.000Z"
    for text in (listed[0], meta[0]):
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}", text), text
    assert listed[0].endswith(":24.250") and meta[0].endswith(":24.000")

    # a row's time: local HH:MM:SS.mmm, the date where it changes (midnight), the UTC time as tooltip
    midnight = time.mktime((2026, 12, 7, 0, 0, 0, 0, 0, -1))
    started = datetime.fromtimestamp(midnight - 1, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    (inspector.folder / "midnight.jsonl").write_bytes(orjson.dumps({
        "type": "header", "format": 1, "time": midnight - 1, "mono": 0, "pid": 1 << 30, "bridge": "0.1.0",
        "started": started, "config": "c"}) + b"\n" + message(1, time=midnight - 0.5) + message(2, time=midnight + 0.25))
    inspector.open("midnight.jsonl")
    inspector.wait(lambda: inspector.body("data-visible") == "2")
    cells = inspector.js("return [].map.call(document.querySelectorAll('#list .sum .t'),function(t){"
                         "return [t.textContent,t.title];})")
    def utc(wall: float) -> str:
        return datetime.fromtimestamp(wall, UTC).isoformat()[:23] + "Z"

    assert cells == [["23:59:59.500", utc(midnight - 0.5)], ["2026-12-0700:00:00.250", utc(midnight + 0.25)]]

    inspector.js("document.querySelector('#captures button.fold').click()")
    assert inspector.body("data-captures-folded") == "1"
    assert inspector.js("return document.querySelectorAll('#captures tr').length") == 0
    inspector.open("times.jsonl")
    inspector.wait(lambda: inspector.body("data-captures-folded") == "1")
    inspector.js("document.querySelector('#captures button.fold').click()")
    assert inspector.wait(lambda: inspector.js("return document.querySelectorAll('#captures tr.cap').length") > 1)


def test_a_rewritten_session_and_its_reports(inspector: Inspector, tmp_path: Path) -> None:
    """A capture with rewrites and findings: the latency table of `stats`, the findings and
    verdict of `check`, the rewrite open before/after (the screenshot of docs/inspector.md)."""
    from tests.capture.sample_session import sample_capture

    sample_capture(inspector.folder / "session.jsonl")
    inspector.open("session.jsonl")
    inspector.wait(lambda: "legacy-suggestions" in (inspector.js("return document.getElementById('side').textContent")))
    side = inspector.js("return document.getElementById('side').textContent")
    assert "session/prompt21.10 s1.30 s1.30 s1.30 s" in side and "verdict: this pair still needs the bridge" in side
    assert '<span class="ins">' in inspector.rows()  # the rewrite, open, with what it added
    if os.environ.get("ACP_BRIDGE_UPDATE_SCREENSHOT"):
        inspector.driver.save_screenshot(str(ROOT / "docs" / "inspector-screenshot.png"))


def test_a_capture_of_200000_messages(inspector: Inspector) -> None:
    """The page draws a screenful of the rows, jumps far down (opened, linked), filters all
    of them; the server stays under 300 MiB."""
    capture = inspector.folder / "big.jsonl"
    messages = write_capture(capture, 200_000)
    drops = [orjson.loads(line)["seq"] for line in capture.read_bytes().splitlines() if b'"verdict":"drop"' in line]
    seq = drops[1500]  # a turn's legacy suggestions, far down, dropped for the converted form
    inspector.open("big.jsonl", f"&m={seq}")
    inspector.wait(lambda: inspector.body("data-live-ready") == "1", seconds=60)
    assert inspector.body("data-visible") == str(messages) and inspector.body("data-at") == str(seq)
    drawn = int(inspector.body("data-drawn") or 0)
    assert 5 < drawn < 100 and inspector.rows().count('class="row ') == drawn
    assert f'<div class="row msg drop open" id="m{seq}"' in inspector.rows()
    assert f">became seq {seq + 1}</a>" in inspector.rows()

    # The rows are drawn in the step that counts them, though the window is still scrolled
    # far below the list's new end (they were drawn a frame later, when the browser clamped
    # the scroll: a read in between found none).
    inspector.js("var b=document.body,l=document.getElementById('list');window.drawnWhenCounted=[];"
                 "new MutationObserver(function(){window.drawnWhenCounted.push([b.getAttribute('data-visible'),"
                 "l.querySelectorAll('.row.msg').length])}).observe(b,{attributeFilter:['data-visible']})")
    box = inspector.driver.find_element(By.ID, "q")
    box.send_keys("test_1234.py")
    inspector.wait(lambda: inspector.body("data-visible") == "2", seconds=60)  # all 200,000 read: as long as above
    assert inspector.js("return window.drawnWhenCounted")[-1] == ["2", 2]
    assert inspector.rows().count('<div class="row msg') == 2
    assert '<span class="cnt">2 of 79 messages</span>' in inspector.rows()
    status = Path(f"/proc/{inspector.proc.pid}/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1))  # type: ignore[union-attr]
    assert rss < 300 * 1024, f"{rss} kB"


def test_a_message_nested_thousands_deep_is_shown_without_hanging_the_page(inspector: Inspector) -> None:
    """The raw text is indented a level per bracket: 6,000 levels (12 KB, under what a row
    keeps) made 72 million characters of padding, and a row that opens by itself (here a
    rule's error) hung the tab as soon as the capture was chosen. Padding stops at a depth."""
    deep = "[" * 6000 + "]" * 6000
    (inspector.folder / "deep.jsonl").write_bytes(header(6.0) + message(1, deep + "\n", verdict="error"))
    inspector.open("deep.jsonl")
    inspector.wait(lambda: inspector.body("data-live-ready") == "1")
    shown = inspector.wait(lambda: inspector.js("var p=document.querySelector('pre.raw');"
                                                "return p?p.textContent.length:0"))
    assert len(deep) < shown < 2_000_000


def test_a_capture_name_with_controls_is_copied_as_one_shell_word(inspector: Inspector) -> None:
    """A file name may hold any byte but / and NUL. The copied show command quoted it in
    '...', where a pasted Ctrl-U erased the line typed so far and a newline ran what came
    next: pasting the command of this capture ran `touch pwned`. Now a control character is
    an escape in $'...', which bash reads back as the name itself."""
    from urllib.parse import quote

    name = "it's\x1b[201~\x15touch pwned\n<i>.jsonl"
    (inspector.folder / name).write_bytes(header(6.0) + message(1))
    inspector.open(quote(name, safe=""))
    inspector.wait(lambda: inspector.body("data-live-ready") == "1")
    assert inspector.js("return document.getElementById('title').textContent") == name
    inspector.js("document.querySelector('#m1 .sum').click()")
    inspector.wait(lambda: pane(inspector))
    inspector.js("document.querySelector('#pane button[data-act=show]').click()")
    copied = inspector.body("data-copied")
    word = "$'it\\'s\\x1b[201~\\x15touch pwned\\x0a<i>.jsonl'"
    assert copied == f"acp-bridge show {word} --seq 1 --detail 3"
    said = subprocess.run(["bash", "-c", f'set -- {word}; printf %s "$1"'], capture_output=True, check=True)
    assert said.stdout == name.encode()
