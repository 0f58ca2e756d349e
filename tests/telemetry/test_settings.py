"""Telemetry's settings: `--otlp`, `--otlp-content`, their ACP_BRIDGE_* variables and the
[telemetry] table, layered as every run option is; bad values are refused before the start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from acp_bridge.commands import main, run
from acp_bridge.config import Config, TelemetryConfig
from tests.conftest import keeper


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[Config]:
    configs: list[Config] = []
    monkeypatch.setattr(run, "run_and_report", keeper(configs))
    monkeypatch.setattr(run, "setup_logging", lambda config: None)
    return configs


def invoke(tmp_path: Path, toml: str, args: list[str], env: dict[str, str] | None = None) -> Any:
    config = tmp_path / "c.toml"
    config.write_text(toml)
    return CliRunner().invoke(main, ["run", "-c", str(config), *args, "--", "agent"], env=env or {})


ON = "[telemetry]\nenabled = true\n"


@pytest.mark.parametrize(("toml", "env", "args", "enabled", "content"), [
    pytest.param("", {}, [], False, False, id="default-off"),
    pytest.param(ON, {}, [], True, False, id="file"),
    pytest.param("", {}, ["--otlp"], True, False, id="flag"),
    pytest.param("", {}, ["--otlp-content"], True, True, id="content-implies-otlp"),
    pytest.param("", {"ACP_BRIDGE_OTLP": "1"}, [], True, False, id="env"),
    pytest.param(ON, {"ACP_BRIDGE_OTLP": "0"}, [], False, False, id="env-turns-the-file-off"),
    pytest.param(ON + "content = true\n", {"ACP_BRIDGE_OTLP": "0"}, [], False, False, id="off-means-no-content"),
    pytest.param(ON, {"ACP_BRIDGE_OTLP_CONTENT": "1"}, [], True, True, id="env-content"),
    pytest.param(ON + "content = true\n", {"ACP_BRIDGE_OTLP_CONTENT": "0"}, [], True, False, id="env-content-off"),
    pytest.param("", {"ACP_BRIDGE_OTLP": "0", "ACP_BRIDGE_OTLP_CONTENT": "1"}, [], False, False,
                 id="off-wins-over-content"),
])
def test_telemetry_is_layered_like_every_run_option(seen: list[Config], tmp_path: Path, toml: str,
                                                     env: dict[str, str], args: list[str], enabled: bool,
                                                     content: bool) -> None:
    result = invoke(tmp_path, toml, args, env)
    assert result.exit_code == 0, result.output
    assert (seen[0].telemetry.enabled, seen[0].telemetry.content) == (enabled, content)


def test_the_table_reaches_the_config(seen: list[Config], tmp_path: Path) -> None:
    result = invoke(tmp_path, ON + 'endpoint = "https://otel.example:4318"\nprotocol = "grpc"\nflush_seconds = 0.5\n', [])
    assert result.exit_code == 0, result.output
    assert seen[0].telemetry == TelemetryConfig(enabled=True, endpoint="https://otel.example:4318", protocol="grpc",
                                                flush_seconds=0.5)


@pytest.mark.parametrize(("toml", "message"), [
    ('protocol = "http/json"', 'telemetry.protocol: \'http/json\' is not one of http/protobuf, grpc'),
    ('endpoint = "localhost:4318"', "telemetry.endpoint: 'localhost:4318' is not an http:// or https:// URL"),
    ("flush_seconds = -1", "telemetry.flush_seconds: must not be negative, got -1"),
    ("flush_seconds = 61", "telemetry.flush_seconds: must be at most 60, got 61"),
    ("flush_seconds = nan", "telemetry.flush_seconds: must be a finite number of seconds, got nan"),
])
def test_bad_telemetry_settings_are_refused_before_the_start(seen: list[Config], tmp_path: Path, toml: str,
                                                             message: str) -> None:
    result = invoke(tmp_path, f"[telemetry]\n{toml}\n", [])
    assert result.exit_code == 2
    assert result.output == f"acp-bridge: {tmp_path / 'c.toml'}: {message}\n"
    assert seen == []


def test_an_unsupported_otel_protocol_variable_is_a_usage_error(tmp_path: Path) -> None:
    """OTEL_EXPORTER_OTLP_PROTOCOL wins over the file, and http/json is not something the
    bridge can send: said before the agent starts, exit 2."""
    pytest.importorskip("opentelemetry.sdk")
    from acp_bridge.config.file import read_config
    from acp_bridge.errors import ConfigError
    from acp_bridge.telemetry.live import telemetry_observer

    config = read_config(None)
    mp = pytest.MonkeyPatch()
    mp.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    try:
        with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' is not supported"):
            telemetry_observer(config)
    finally:
        mp.undo()
