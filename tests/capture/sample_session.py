"""A short, realistic session recorded through the real rewrites, as a capture file (for the
HTML export's tests and the inspector's browser tests)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from acp_bridge.capture.records import CaptureEncoder, dumps, header_record
from acp_bridge.capture.redaction import Redactor
from acp_bridge.config import CaptureConfig, Config, SystemPromptConfig
from acp_bridge.core import Direction, Relay
from acp_bridge.core.rewrites import build_rewrites
from tests.conftest import example, line

A, C = Direction.TO_AGENT, Direction.TO_CLIENT
WALL = 1_700_000_000.0
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
