"""Without the otel extra: the bridge runs as before, and asking for telemetry says how to
install it (exit 2) before anything starts. The extra is made missing in a child process
by a meta path finder that refuses every `opentelemetry` module (and says so on stderr)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.capture.samples import FIXED, HEADER
from tests.cli_helpers import without_package
from tests.conftest import agent_cmd, invoke

BLOCKED = """
import sys
class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            sys.stderr.write("blocked " + name + "\\n")
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Blocker())
sys.argv[0] = "acp-bridge"
from acp_bridge.commands import main
main()
"""
HINT = ("acp-bridge: telemetry needs the OpenTelemetry SDK, which is not installed "
        "(opentelemetry.sdk.trace not found): pip install 'acp-bridge-proxy[otel]' (in a clone: pip install '.[otel]')\n")


def without_extra(*args: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-c", BLOCKED, *args], input=stdin, capture_output=True,
                          timeout=60, check=False, env={**os.environ, **(env or {})})


def test_run_without_telemetry_never_imports_the_sdk() -> None:
    done = without_extra("run", "--", *agent_cmd("echo"), stdin=b'{"x":1}\n')
    assert (done.returncode, done.stdout) == (0, b'{"x":1}\n')
    assert b"blocked" not in done.stderr


def test_otlp_without_the_extra_says_how_to_install_it_before_starting_the_agent(tmp_path: Path) -> None:
    pidfile = tmp_path / "agent.pid"
    for option in ("--otlp", "--otlp-content"):
        done = without_extra("run", option, "--", *agent_cmd("echo"), env={"FAKE_AGENT_PIDFILE": str(pidfile)})
        assert (done.returncode, done.stdout) == (2, b"")
        assert done.stderr.decode().endswith(HINT)
    assert not pidfile.exists()


def test_export_otlp_without_the_extra_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In this process (`export` relays nothing), the extra made missing as BLOCKED does."""
    capture = tmp_path / "c.jsonl"
    capture.write_bytes(b"".join(orjson.dumps(record) + b"\n" for record in [HEADER, *FIXED]))
    without_package("opentelemetry", monkeypatch)
    done = invoke(["export", str(capture), "--otlp"])
    assert done.returncode == 2
    assert done.stderr.decode().endswith(HINT)
