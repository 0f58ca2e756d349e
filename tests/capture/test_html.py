"""`export --html`: the page's structure (pure), and the page as a real headless browser renders it."""

from __future__ import annotations

import copy
import fnmatch
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from acp_bridge.capture.html import asset, group_turns, render
from acp_bridge.capture.reading import utc_clock
from acp_bridge.capture.records import CaptureEncoder, dumps, header_record
from acp_bridge.capture.redaction import Redactor
from acp_bridge.cli import main
from acp_bridge.config import CaptureConfig, Config, SystemPromptConfig
from acp_bridge.core import Direction, Relay
from acp_bridge.core.rewrites import build_rewrites
from tests.conftest import ROOT, example, line

A, C = Direction.TO_AGENT, Direction.TO_CLIENT
WALL = 1_700_000_000.0
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PROMPT = "Follow the team style guide."


def chunk(text: str) -> dict[str, Any]:
    msg = example("v1-session-update-agent-message-chunk")
    msg = copy.deepcopy(msg)
    msg["params"]["update"]["content"] = {"type": "text", "text": text}
    return msg


def prompt(id_: int, text: str) -> dict[str, Any]:
    msg = copy.deepcopy(example("v1-session-prompt-request"))
    msg["id"] = id_
    msg["params"]["prompt"] = [{"type": "text", "text": text}]
    return msg


def sample_capture(path: Path) -> Path:
    """A short, realistic session through the real rewrites: setup, two turns, a rewrite of
    legacy suggestions, the bridge's own withdrawal, a secret to redact, a stray line."""
    config = Config(system_prompt=SystemPromptConfig(text=PROMPT), capture=CaptureConfig(path=str(path)))
    relay = Relay(build_rewrites(config), strict=True)
    encoder = CaptureEncoder(Redactor((), PROMPT))
    new = copy.deepcopy(example("v1-session-new-request-plain"))
    new["params"]["mcpServers"] = [{"name": "fs", "command": "mcp-fs", "args": [],
                                    "env": [{"name": "GITHUB_TOKEN", "value": "ghp_s3cret"}]}]
    response = example("v1-session-prompt-response")
    script: list[tuple[float, Direction, bytes]] = [
        (0.00, A, line(example("v1-initialize-request-client-with-suggestions"))),
        (0.04, C, line(example("v1-initialize-response-agent-no-system-prompt"))),
        (0.10, A, line(new)),
        (0.31, C, line(example("v1-session-new-response"))),
        (1.00, A, line(prompt(2, "Why does the login test fail on CI?"))),
        (1.40, C, line(chunk("The test depends on the local timezone; "))),
        (1.55, C, line(chunk("CI runs in UTC."))),
        (2.10, C, line({**response, "id": 2})),
        (2.15, C, line(example("v1-session-update-legacy-prompt-suggestions"))),
        (2.20, C, b"agent: debug output on stdout\n"),
        (5.00, A, line(prompt(3, "Fix it"))),
        (5.90, C, line(chunk("Done: the test now pins TZ=UTC."))),
        (6.30, C, line({**response, "id": 3})),
    ]
    with path.open("wb") as file:
        file.write(dumps(header_record(wall=WALL, mono=0.0, argv=["acp-bridge", "run", "--", "agent"],
                                       config_digest=config.digest(), pid=4242)))
        for mono, direction, data in script:
            file.write(encoder.encode_batch(WALL + mono, mono, relay.feed(direction, data, mono)))
        file.write(encoder.trailer(WALL + 7, 7.0))
    return path


def read(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


def test_turns_group_a_prompt_and_what_followed_until_its_response(tmp_path: Path) -> None:
    records = [r for r in read(sample_capture(tmp_path / "c.jsonl")) if r["type"] == "message"]
    groups = group_turns(records)
    assert [(g.title, g.kind) for g in groups] == [
        ("Setup", "outside"), ("Turn 1", "turn"), ("Between turns", "outside"), ("Turn 2", "turn")]
    turn1 = groups[1]
    assert turn1.request is not None and turn1.request["method"] == "session/prompt"
    assert turn1.response is not None and turn1.response["id"] == 2
    assert turn1.records[-1] is turn1.response
    assert {r["session"] for r in turn1.records} == {"sess_abc123"}


def test_page_is_self_contained_and_redacted(tmp_path: Path) -> None:
    page = render(read(sample_capture(tmp_path / "c.jsonl")), title="c.jsonl", clock=utc_clock)
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    # Nothing is fetched: no external resources of any kind.
    assert not re.search(r"""(src|href)\s*=|@import|url\(|<link|https?://""", page)
    assert "ghp_s3cret" not in page and PROMPT not in page
    assert page.count('<details class="msg') == len([r for r in read(tmp_path / "c.jsonl")
                                                      if r["type"] == "message"])
    assert "before (from the agent)" in page and "after (to the client)" in page  # a rewrite
    assert "sent by the bridge" in page  # the bridge's own message
    assert "Turn 1 · session sess_abc123 · “Why does the login test fail on CI?”" in page


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
    assert "hunter2" not in page and "&lt;redacted&gt;" in page


def test_a_header_pointer_that_is_none_leaves_the_others_masking() -> None:
    """A capture edited by hand: each valid pointer of the header still masks."""
    header = {**header_record(wall=WALL, mono=0, argv=[], config_digest="x", pid=1),
              "redact": ["/a~b", 7, "/params/key", "nope"]}
    raw = line({"jsonrpc": "2.0", "method": "note", "params": {"key": "hunter2", "n": 1}})
    record = {"type": "message", "seq": 1, "time": WALL, "mono": 0, "direction": "to-agent",
              "kind": "notification", "verdict": "pass", "method": "note", "id": None, "session": None,
              "rules": [], "size": len(raw), "raw": raw.decode()}
    page = render([header, record], clock=utc_clock)
    assert "hunter2" not in page and "&lt;redacted&gt;" in page


def test_the_page_files_are_package_data() -> None:
    """`pip install .` (the README's quickstart) installs a wheel, which holds only the
    package data pyproject names: every file of assets/ must be named (a wheel built with
    it was checked to hold them and export the same page)."""
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assets = ROOT / "acp_bridge" / "capture" / "assets"
    names = sorted(path.name for path in assets.iterdir())
    assert names == ["page.css", "page.html", "page.js"]
    for name in names:
        assert any(fnmatch.fnmatch(f"assets/{name}", glob) for glob in globs["acp_bridge.capture"]), name
        assert asset(name) == (assets / name).read_text(encoding="utf-8")


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1280,900", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )


needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium); the export page "
                             "is checked in a real headless browser")


@needs_chromium
def test_page_renders_and_filters_in_a_real_browser(tmp_path: Path) -> None:
    """Chromium runs the page's script: every message is in the DOM, and `#q=` filters."""
    capture = sample_capture(tmp_path / "c.jsonl")
    page = tmp_path / "export.html"
    result = CliRunner().invoke(main, ["export", str(capture), "--html", str(page)])
    assert result.exit_code == 0, result.output
    total = len([r for r in read(capture) if r["type"] == "message"])

    dom = chromium("--dump-dom", page.as_uri(), profile=tmp_path / "p1").stdout
    assert 'data-ready="1"' in dom and f'data-visible="{total}"' in dom
    assert "session/prompt" in dom and "CI runs in UTC." in dom and f"{total} of {total} messages" in dom

    dom = chromium("--dump-dom", page.as_uri() + "#q=pins%20tz", profile=tmp_path / "p2").stdout
    assert 'data-visible="1"' in dom and f"1 of {total} messages" in dom
    visible = [tag for tag in re.findall(r'<details class="msg[^>]*>', dom) if "hidden" not in tag]
    assert len(visible) == 1, visible
    # Groups without a visible message are hidden too.
    assert dom.count('<section class="group turn" hidden') + dom.count('<section class="group outside" hidden') == 3

    shot = tmp_path / "shot.png"
    chromium(f"--screenshot={shot}", page.as_uri(), profile=tmp_path / "p3")
    assert shot.exists() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    if os.environ.get("ACP_BRIDGE_UPDATE_SCREENSHOT"):
        shutil.copyfile(shot, ROOT / "docs" / "export-screenshot.png")
