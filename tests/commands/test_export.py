"""`acp-bridge export` on a small fixed capture: the page, and what is refused."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from acp_bridge.commands import main
from tests.capture.samples import page_rows


def test_export_writes_a_page(capture: Path, tmp_path: Path) -> None:
    out = tmp_path / "page.html"
    result = CliRunner().invoke(main, ["export", str(capture), "--html", str(out)])
    assert result.exit_code == 0
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert [r["s"] for r in page_rows(page) if "h" not in r] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize(("content", "message"), [
    (b"", "c.jsonl: empty, not a capture"),
    (b"root:x:0:0:root:/root:/bin/bash\n", "c.jsonl:1: not a capture (the first line is not a header record)"),
    (b'{"type":"message","seq":1}\n', "c.jsonl:1: not a capture (the first line is not a header record)"),
    (b'{"type":"header","format":2}\n', "c.jsonl:1: capture format 2; this acp-bridge reads format 1"),
    (b'{"type":"header","format":true}\n', "c.jsonl:1: capture format True; this acp-bridge reads format 1"),
])
def test_export_refuses_what_is_not_a_capture(tmp_path: Path, content: bytes, message: str) -> None:
    capture = tmp_path / "c.jsonl"
    capture.write_bytes(content)
    out = tmp_path / "page.html"
    result = CliRunner().invoke(main, ["export", str(capture), "--html", str(out)])
    assert (result.exit_code, result.output) == (2, f"acp-bridge: {tmp_path}/{message}\n")
    assert list(tmp_path.iterdir()) == [capture]  # no page, no partial file left behind


def test_export_refuses_a_device_and_a_bad_line_and_reads_past_a_torn_one(capture: Path, tmp_path: Path) -> None:
    out = tmp_path / "page.html"
    result = CliRunner().invoke(main, ["export", "/dev/zero", "--html", str(out)])
    assert (result.exit_code, result.output) == (2, "acp-bridge: /dev/zero: not a regular file, so not a capture\n")
    lines = capture.read_bytes().splitlines(keepends=True)
    capture.write_bytes(b"".join(lines[:3]) + b"not json\n" + b"".join(lines[3:-1]) + lines[-1][:20])
    result = CliRunner().invoke(main, ["export", str(capture), "--html", str(out)])
    assert (result.exit_code, result.output) == (2, f"acp-bridge: {capture}:4: not a capture record\n")
    assert not out.exists()
    capture.write_bytes(b"".join(lines[:-1]) + lines[-1][:20])
    result = CliRunner().invoke(main, ["export", str(capture), "--html", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == (
        f"acp-bridge: {capture}:7: the torn last line (the bridge was killed while writing it) was ignored")
    assert oct(out.stat().st_mode & 0o777) == "0o600"


def test_export_replaces_a_symlink_at_out_and_never_writes_through_it(capture: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out = tmp_path / "page.html"
    out.symlink_to(victim)
    result = CliRunner().invoke(main, ["export", str(capture), "--html", str(out)])
    assert result.exit_code == 0, result.output
    assert victim.read_text() == "keep me" and not out.is_symlink() and out.read_text().startswith("<!DOCTYPE")


def test_export_into_a_missing_folder_says_so(capture: Path, tmp_path: Path) -> None:
    out = tmp_path / "no" / "page.html"
    result = CliRunner().invoke(main, ["export", str(capture), "--html", str(out)])
    assert (result.exit_code, result.output) == (
        1, f"acp-bridge: export: cannot write {out}: No such file or directory\n")


def test_sigterm_during_export_leaves_no_partial_page(tmp_path: Path) -> None:
    from bench.big_capture import write_capture

    capture = tmp_path / "big.jsonl"
    write_capture(capture, 100_000)
    out = tmp_path / "page.html"
    with subprocess.Popen([sys.executable, "-m", "acp_bridge", "export", str(capture), "--html", str(out)],
                          stderr=subprocess.PIPE) as proc:
        deadline = time.monotonic() + 60
        while not any(p.name.endswith(".partial") for p in tmp_path.iterdir()):
            assert proc.poll() is None and time.monotonic() < deadline, "export ended before its page was begun"
            time.sleep(0.005)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
        assert (proc.returncode, stderr) == (128 + signal.SIGTERM, b"")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.jsonl"]
