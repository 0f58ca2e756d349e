"""The capture writer process against a hostile world (acp_bridge/capture/worker.py): a
working folder holding modules of its own, a writer that stops reading, what a child of the
bridge could inherit."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from acp_bridge.capture.records import CaptureEncoder
from acp_bridge.capture.redaction import Redactor
from acp_bridge.capture.worker import Progress, run_head
from acp_bridge.core import Direction, Forward, Verdict
from tests.capture.test_worker import CHUNK, start

C = Direction.TO_CLIENT


def test_the_working_folder_is_not_on_the_writers_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -m` puts the working folder first on sys.path: a project the editor opens
    (the bridge's working folder) must not get its `orjson.py` run by the writer, which
    also holds the system prompt; nor lose the capture to it."""
    project = tmp_path / "project"
    project.mkdir()
    marker = tmp_path / "ran"
    (project / "orjson.py").write_text(f"open({str(marker)!r}, 'w').close()\nraise ImportError('not orjson')\n")
    monkeypatch.chdir(project)
    path = tmp_path / "c.jsonl"
    worker = start(path, Redactor())
    run = Forward(C, CHUNK * 3, CHUNK * 3, Verdict.PASS, untouched_lines=True)
    worker.send([run_head(0, 2.0, 3.0, "to-client", len(run.raw)), run.raw])
    assert worker.finish() is None
    assert not marker.exists()
    assert path.read_bytes() == CaptureEncoder().encode_batch(2.0, 3.0, [run])


def test_the_shared_page_is_not_inherited_by_the_bridges_children() -> None:
    progress = Progress.create()
    try:
        assert not os.get_inheritable(progress.fd)
    finally:
        progress.close()
