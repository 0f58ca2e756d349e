"""`export --html`: the page's structure (pure), and the page as a real headless browser renders it."""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import tomllib
from pathlib import Path
from typing import Any

import orjson
from click.testing import CliRunner

from acp_bridge.capture.html import asset, render
from acp_bridge.capture.records import dumps, header_record
from acp_bridge.capture.summary import utc_clock
from acp_bridge.commands import main
from tests.browser import Browser, needs_browser
from tests.capture.sample_session import PROMPT, WALL, sample_capture
from tests.capture.samples import page_rows
from tests.conftest import ROOT, line


def read(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


def test_turns_group_a_prompt_and_what_followed_until_its_response(tmp_path: Path) -> None:
    rows = page_rows(render(read(sample_capture(tmp_path / "c.jsonl")), clock=utc_clock))
    headers = [(i, r["h"], r["ti"]) for i, r in enumerate(rows) if "h" in r]
    assert headers == [(0, "outside", "Setup"), (5, "turn", "Turn 1"), (9, "outside", "Between turns"),
                       (13, "turn", "Turn 2")]
    turn1 = [r for r in rows if r.get("g") == 5]
    assert [r["s"] for r in turn1] == [5, 6, 8]  # the prompt, two chunks folded, its answer
    assert rows[5]["q"] == 6 and rows[6]["l"] == "session/prompt id 2"
    assert turn1[-1] == rows[8] and rows[8]["q"] == 6 and rows[8]["sr"] == "end_turn" and rows[8]["lat"] == 1.1
    assert {r["ss"] for r in turn1} == {"sess_abc123"}


def test_page_is_self_contained_and_redacted(tmp_path: Path) -> None:
    page = render(read(sample_capture(tmp_path / "c.jsonl")), title="c.jsonl", clock=utc_clock)
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    # Nothing is fetched: no external resources of any kind.
    assert not re.search(r"""(src|href)\s*=|@import|url\(|<link|https?://""", page)
    assert "ghp_s3cret" not in page and PROMPT not in page
    rows = page_rows(page)
    messages = [r for r in read(tmp_path / "c.jsonl") if r["type"] == "message"]
    assert sum(r.get("n", 1) for r in rows if "h" not in r) == len(messages)
    summary = orjson.loads(re.findall(r'class="summary">(.*?)</script>', page)[0])
    assert summary == [{"title": "c.jsonl", "messages": 15, "turns": 2, "rows": 18, "bridge": "0.1.0",
                        "started": "2023-11-14T22:13:20Z", "findings": 0}]


def test_export_redacts_again_with_the_capture_pointers(tmp_path: Path) -> None:
    """A capture written with fewer masks still goes out masked by the header's pointers."""
    path = tmp_path / "c.jsonl"
    header = header_record(wall=WALL, mono=0, argv=[], config_digest="x", pid=1, redact=["/params/key"])
    raw = line({"jsonrpc": "2.0", "method": "note", "params": {"key": "hunter2", "n": 1}})
    record = {"type": "message", "seq": 1, "time": WALL, "mono": 0, "direction": "to-agent",
              "kind": "notification", "verdict": "pass", "method": "note", "id": None, "session": None,
              "rules": [], "size": len(raw), "raw": raw.decode()}
    path.write_bytes(dumps(header) + dumps(record))
    out = tmp_path / "out.html"
    result = CliRunner().invoke(main, ["export", str(path), "--html", str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert "hunter2" not in page and '"key":"<redacted>"' in page_rows(page)[1]["b"]


def test_a_header_pointer_that_is_none_leaves_the_others_masking() -> None:
    """A capture edited by hand: each valid pointer of the header still masks."""
    header = {**header_record(wall=WALL, mono=0, argv=[], config_digest="x", pid=1),
              "redact": ["/a~b", 7, "/params/key", "nope"]}
    raw = line({"jsonrpc": "2.0", "method": "note", "params": {"key": "hunter2", "n": 1}})
    record = {"type": "message", "seq": 1, "time": WALL, "mono": 0, "direction": "to-agent",
              "kind": "notification", "verdict": "pass", "method": "note", "id": None, "session": None,
              "rules": [], "size": len(raw), "raw": raw.decode()}
    page = render([header, record], clock=utc_clock)
    assert "hunter2" not in page and '"key":"<redacted>"' in page_rows(page)[1]["b"]


def test_the_page_files_are_package_data() -> None:
    """`pip install .` (the README's quickstart) installs a wheel, which holds only the
    package data pyproject names: every file of assets/ must be named (a wheel built with
    it was checked to hold them and export the same page)."""
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assets = ROOT / "acp_bridge" / "capture" / "assets"
    names = sorted(path.name for path in assets.iterdir())
    assert names == ["live.js", "page.css", "page.html", "page.js"]
    for name in names:
        assert any(fnmatch.fnmatch(f"assets/{name}", glob) for glob in globs["acp_bridge.capture"]), name
        assert asset(name) == (assets / name).read_text(encoding="utf-8")


def body_of(dom: str) -> dict[str, str]:
    """The attributes the page's script sets on <body> once it has drawn."""
    tag = re.search(r"<body([^>]*)>", dom)
    assert tag is not None, dom[:500]
    return dict(re.findall(r'(data-[a-z-]+)="([^"]*)"', tag.group(1)))


def drawn(dom: str) -> str:
    """The rows the page drew (the DOM after the JSON blocks and the script are cut off)."""
    start = dom.index('<div id="list"')
    return dom[start:dom.index("</main>", start)]


@needs_browser("the export page")
def test_only_the_pages_own_script_runs_in_an_export(tmp_path: Path, browser: Browser) -> None:
    """The policy names page.js by its hash: markup that slipped into the page (were the
    escaping of a message ever to miss) cannot run a script or an event handler, as it
    could while the policy allowed any inline script."""
    capture = sample_capture(tmp_path / "c.jsonl")
    page = tmp_path / "export.html"
    assert CliRunner().invoke(main, ["export", str(capture), "--html", str(page)]).exit_code == 0
    injected = ('<script>document.body.setAttribute("data-pwned","script")</script>'
                '<img src="x" onerror="document.body.setAttribute(\'data-pwned\',\'handler\')">')
    page.write_text(page.read_text(encoding="utf-8").replace("</body>", injected + "</body>"), encoding="utf-8")
    browser.load(page.as_uri())  # page.js, named by its hash, ran: it set data-ready
    # The image has failed to load, so its error event is due: the next task runs after it.
    browser.wait(lambda: browser.js("return document.readyState==='complete'&&document.images[0].complete"))
    browser.driver.execute_async_script("setTimeout(arguments[0], 0)")
    assert "data-pwned" not in body_of(browser.dom()) and body_of(browser.dom())["data-ready"] == "1"


@needs_browser("the export page")
def test_page_renders_and_filters_in_a_real_browser(tmp_path: Path, browser: Browser) -> None:
    """Chromium runs the page's script: rows, previews, before/after with the change
    marked, links both ways, group counts that follow the filter, a turn's timing view."""
    capture = sample_capture(tmp_path / "c.jsonl")
    page = tmp_path / "export.html"
    result = CliRunner().invoke(main, ["export", str(capture), "--html", str(page)])
    assert result.exit_code == 0, result.output
    total = len([r for r in read(capture) if r["type"] == "message"])

    browser.load(page.as_uri())
    shot = tmp_path / "shot.png"
    assert browser.driver.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    if os.environ.get("ACP_BRIDGE_UPDATE_SCREENSHOT"):
        shutil.copyfile(shot, ROOT / "docs" / "export-screenshot.png")
    dom = browser.dom()
    assert body_of(dom)["data-ready"] == "1" and body_of(dom)["data-visible"] == str(total)
    rows = drawn(dom)
    # 15 messages in 14 rows (two chunks fold into one), of which the last lies below the
    # fold of a 900-pixel window, under the reports: 13 drawn.
    assert f"{total} of {total} messages" in dom and rows.count('<div class="row msg') == 13
    assert ("Turn 1 · session sess_abc123 · “&lt;redacted: system prompt&gt; Why does the login test fail on "
            "CI?” · 1.10 s · end_turn · <span class=\"cnt\">4 messages</span>") in rows
    # Previews: the chunks folded into one row with their text joined, the stop reason.
    assert ('<b>session/update agent_message_chunk ×2</b> <span class="sess">sess_abc123</span> '
            '<span class="size">387B</span> <span class="pv">The test depends on the local timezone; '
            "CI runs in UTC.</span>") in rows
    assert '<span class="pv">stopReason: end_turn</span>' in rows
    # A request and its answer link to each other, with the latency.
    assert '<a class="jump" data-go="8">→ answered in 1.10 s</a>' in rows
    assert '<a class="jump" data-go="6">↩ seq 5 (session/prompt id 2)</a>' in rows
    # The drop and what the bridge sent in its place are both open and linked.
    assert '<a class="jump" data-go="11">became seq 10</a>' in rows
    assert '<a class="jump" data-go="10">in place of seq 9</a>' in rows
    assert '<div class="row msg drop open"' in rows and '<div class="row msg emit open"' in rows
    # Protocol findings (computed as `check` does: legacy-suggestions, system-prompt-fallback,
    # stray-output for "oops") are marked on the messages they concern;
    # the latency of `stats` and the verdict of `check` head the page, as in the inspector.
    assert "3 findings" in dom
    side = dom[dom.index('<aside id="side">'):dom.index("</aside>")]
    assert "<tr><td>session/prompt</td><td>2</td><td>1.10 s</td><td>1.30 s</td><td>1.30 s</td><td>1.30 s</td></tr>" in side
    assert "verdict: this pair still needs the bridge because the agent sends suggestions" in side
    assert ('<span class="fd info" title="the agent sent a legacy suggestion (_meta.promptSuggestions)">'
            "legacy-suggestions</span>") in rows
    assert ('<p class="fd info">info legacy-suggestions: the agent sent a legacy suggestion '
            "(_meta.promptSuggestions)</p>") in rows  # the drop is open: the finding is spelled out
    assert '">system-prompt-fallback</span>' in rows
    # The rewrite's after marks what was added, line by line.
    assert '<span class="ins">        "text": "&lt;redacted: system prompt&gt;"</span>' in rows
    assert '<span class="del">' not in rows

    browser.load(page.as_uri() + "#q=pins%20tz")
    dom = browser.dom()
    assert body_of(dom)["data-visible"] == "1" and f"1 of {total} messages" in dom
    rows = drawn(dom)
    assert rows.count('<div class="row msg') == 1 and rows.count('<section class="row group') == 1
    assert '<span class="cnt">1 of 4 messages</span>' in rows  # the group's count follows the filter

    browser.load(page.as_uri() + "#timing=2")
    dom = browser.dom()
    timing = drawn(dom).split('<div class="wf">')[1]
    bars = re.findall(r'<i class="wb (\w+)" style="left:([\d.]+)%;width:([\d.]+)%"></i>', timing)
    # Turn 2 runs from 5.0 s to 6.3 s: the prompt until its answer, the bridge's
    # withdrawal at once, the chunk at 0.9 s.
    assert bars == [("req", "0.00", "100.00"), ("note", "0.00", "0.30"), ("note", "69.23", "0.30")]


# The 200,000-message page is checked in the browser once, through the inspector, which draws
# this same page (tests/inspector/test_browser.py::test_a_capture_of_200000_messages).


@needs_browser("the export page")
def test_the_exported_page_shows_a_message_in_the_pane_beside_the_list(tmp_path: Path, browser: Browser) -> None:
    """The export has the inspector's pane and keys: a click opens a message beside the list
    (JSON, raw line, the other half of its pair); a run of chunks shows the text the page
    keeps, its messages being in the capture only; Enter, Escape and the arrow keys work."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    capture = sample_capture(tmp_path / "c.jsonl")
    page = tmp_path / "export.html"
    assert CliRunner().invoke(main, ["export", str(capture), "--html", str(page)]).exit_code == 0
    browser.load(page.as_uri())
    read_pane = ("var p=document.getElementById('pane');if(p.hidden)return null;"
                 "var t=function(s){return [].map.call(p.querySelectorAll(s),function(e){return e.textContent;});};"
                 "return [document.body.getAttribute('data-pane'),t('.ph b')[0],t('.pair'),t('.tree summary'),"
                 "t('pre.rawline'),t('h4')];")
    assert browser.js(read_pane) is None
    browser.js("document.querySelector('#list [data-i=\"6\"] .sum').click()")
    seq, title, links, tree, raw, heads = browser.wait(lambda: browser.js(read_pane))
    assert (seq, title, links) == ("5", "session/prompt id 2", ["response: seq 8 session/prompt id 2 ok 1.10s"])
    assert tree[:2] == ["{4}", "params: {2}"] and raw[0].startswith('{"jsonrpc":"2.0","id":2,"method":"session/prompt"')
    # the prompt carries the injected system prompt: what the rule changed, before and after
    assert heads == ["what the rules did", "before (from the client)", "after (to the agent)", "JSON (as it went out)",
                     "raw line (as it came)"]

    keys = ActionChains(browser.driver)
    keys.send_keys(Keys.ARROW_DOWN).perform()  # the open pane follows the selection: the folded chunks
    seq, title, links, tree, raw, heads = browser.wait(lambda: (browser.js(read_pane) or [""])[0] == "6"
                                                       and browser.js(read_pane))
    assert title == "session/update agent_message_chunk ×2" and heads == ["2 messages folded into this row"]
    assert raw == ["The test depends on the local timezone; CI runs in UTC."]
    keys.send_keys(Keys.ESCAPE).perform()
    assert browser.wait(lambda: browser.js(read_pane) is None)
    keys.send_keys(Keys.ENTER).perform()
    assert browser.wait(lambda: browser.js(read_pane))[0] == "6"
