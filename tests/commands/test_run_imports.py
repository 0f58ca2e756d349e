"""What `acp-bridge run` imports on its way to relaying (issue 17, start-up within the bare
trio relay + 10 ms): nothing that only another command, a capture, telemetry, a system
prompt, a config file or an agent that wrote to stderr needs. Each test runs the real
command as a child with `-X importtime` (PYTHONPROFILEIMPORTTIME), whose report names every
module the process imported, and checks the names; the features' own runs show that each
lazy import still happens where its feature starts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli

# Not needed to relay with the defaults; each is imported by the feature that uses it.
LAZY = {
    "acp_bridge.capture",  # the package, and every capture module: --capture
    "acp_bridge.capture.redaction",  # masking: a capture
    "acp_bridge.capture.text_redaction",  # masking of free text: a capture, or an agent's stderr tail
    "acp_bridge.shell.capture_file",
    "acp_bridge.core.rewrites.system_prompt",  # the rule: a system prompt is configured
    "acp_bridge.core.rewrites.system_prompt_shapes",  # its dialects, plans and edits
    "acp_bridge.core.statistics",  # Relay.statistics(): asked for by tests and tools, not by a run
    "acp_bridge.telemetry",  # --otlp
    "acp_bridge.replay",  # `replay`
    "acp_bridge.commands.check",  # each other command's module: that command
    "acp_bridge.commands.check_config",
    "acp_bridge.commands.show",
    "acp_bridge.commands.stats",
    "acp_bridge.commands.export",
    "acp_bridge.commands.captures",
    "acp_bridge.commands.replay",
    "acp_bridge.commands.demo",
    "acp_bridge.commands.output_file",
    "acp_bridge.config.file",  # a config file: its reader and schema,
    "acp_bridge.config.schema",
    "tomllib",  # and TOML
}
# What a plain run does import: proof that the report was read, so that the LAZY check can fail.
NEEDED = {"trio", "click", "acp_bridge.commands.run", "acp_bridge.shell.agent", "acp_bridge.shell.bridge",
          "acp_bridge.health.watchdog"}


async def imported_by(args: list[str]) -> set[str]:
    """The modules `acp-bridge run ARGS` imported; it must relay nothing and succeed."""
    result = await run_cli(["run", *args], env={"PYTHONPROFILEIMPORTTIME": "1"})
    report = result.stderr.decode()
    assert (result.returncode, result.stdout) == (0, b""), report
    return {line.rsplit("|", 1)[1].strip() for line in report.splitlines() if line.startswith("import time:")}


@pytest.mark.detail
async def test_a_plain_run_imports_only_what_relaying_needs() -> None:
    imported = await imported_by(["--", "true"])
    assert sorted(NEEDED - imported) == []
    assert sorted(LAZY & imported) == []


@pytest.mark.detail
async def test_each_feature_imports_its_own_modules_when_it_starts(tmp_path: Path) -> None:
    """A config file loads its reader; a system prompt loads its rule; an agent that wrote
    to stderr loads the masking of the tail that goes to the client."""
    config = tmp_path / "bridge.toml"
    config.write_text("[relay]\ngrace_seconds = 5\n")
    agent = ["sh", "-c", "echo 'agent: bye' >&2"]  # not Python: no import report of its own
    imported = await imported_by(["-c", str(config), "--system-prompt", "be brief", "--", *agent])
    wanted = {"acp_bridge.config.file", "tomllib", "acp_bridge.core.rewrites.system_prompt",
              "acp_bridge.core.rewrites.system_prompt_shapes", "acp_bridge.capture.text_redaction"}
    assert sorted(wanted - imported) == []
