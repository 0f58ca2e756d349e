"""The span model: what telemetry is fed (`Timed` messages) and what it makes of them (`SpanRecord`).

Owns: the plain records passed between the builder (pure), the live observer, the capture
reader and the SDK adapter, and the names of spans, attributes and metrics (following the
OpenTelemetry GenAI and RPC semantic conventions where they apply; docs/telemetry.md).
Must never: import the OpenTelemetry SDK, do IO or read a clock (times are passed in).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from acp_bridge.core.session import Pending

# Span kinds, as the adapter maps them onto the SDK's.
INTERNAL, CLIENT = "internal", "client"

# Attribute names. GenAI conventions (gen_ai.*) where one fits, RPC conventions for the
# JSON-RPC requests, and acp.* / acp_bridge.* for what only ACP or the bridge has.
OPERATION = "gen_ai.operation.name"
AGENT_NAME = "gen_ai.agent.name"
AGENT_VERSION = "gen_ai.agent.version"
CONVERSATION = "gen_ai.conversation.id"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"  # content: only with --otlp-content
TOOL_RESULT = "gen_ai.tool.call.result"  # content
INPUT_MESSAGES = "gen_ai.input.messages"  # content
OUTPUT_MESSAGES = "gen_ai.output.messages"  # content
RPC_SYSTEM = "rpc.system"
RPC_METHOD = "rpc.method"
RPC_ID = "rpc.jsonrpc.request_id"
RPC_ERROR_CODE = "rpc.jsonrpc.error_code"
RPC_ERROR_MESSAGE = "rpc.jsonrpc.error_message"  # content
DIRECTION = "acp.direction"  # where a request went: to-agent or to-client
SESSION_ID = "acp.session.id"
TIME_TO_FIRST_CHUNK = "acp.turn.time_to_first_chunk"
TOOL_TITLE = "acp.tool_call.title"
TOOL_KIND = "acp.tool_call.kind"
TOOL_STATUS = "acp.tool_call.status"
PERMISSION_OUTCOME = "acp.permission.outcome"
PERMISSION_OPTION = "acp.permission.option_id"
PERMISSION_OPTION_KIND = "acp.permission.option_kind"
UNFINISHED = "acp.unfinished"  # the span was still open when the connection or capture ended
EVICTED = "acp.evicted"  # ended early: too many open at once (bounded memory)
DIALECT = "acp_bridge.system_prompt.dialect"
BRIDGE_ACTION = "acp_bridge.action"
RULE_EVENT, RULE_NAME, RULE_VERDICT = "acp_bridge.rule", "acp_bridge.rule.name", "acp_bridge.rule.verdict"
SUGGESTIONS = "acp_bridge.suggestions"  # how many suggestions an update the bridge changed carries

# Metric names (instrument, unit).
TURN_DURATION = "acp.turn.duration"
TTFC_METRIC = "acp.turn.time_to_first_chunk"
TOOL_DURATION = "acp.tool_call.duration"
REQUESTS = "acp.requests"
BYTES = "acp.bytes"
MESSAGES = "acp.messages"
HISTOGRAMS = (TURN_DURATION, TTFC_METRIC, TOOL_DURATION)


@dataclass(slots=True)
class Timed:
    """One message with its time, as telemetry is fed it: when its read completed, where it
    went, the message as it came (None: not a JSON-RPC object), what the bridge did, for a
    rewritten line the message as it went out, and the request as the relay's `Connection`
    paired it (a request's own, a response's request).
    """

    wall: float
    direction: str  # "to-agent" | "to-client"
    msg: Any
    verdict: str = "pass"
    rules: tuple[str, ...] = ()
    sent: Any = None  # for verdict "rewrite": what went out, if the builder needs it
    request: Pending | None = None  # None: a notification, or a response that answers nothing


@dataclass(slots=True)
class SpanRecord:
    """A span with its own ids: the builder chooses them, so children can name a parent
    that has not ended yet, and the adapter hands them to the SDK as they are."""

    name: str
    trace_id: int
    span_id: int
    parent_id: int | None
    start: float  # Unix seconds
    kind: str = INTERNAL
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[str, float, dict[str, Any]]] = field(default_factory=list)
    end: float | None = None
    error: str | None = None  # set: the span's status is ERROR, with this description

    def __repr__(self) -> str:
        return f"<SpanRecord {self.name!r} {self.span_id:016x} parent={self.parent_id}>"


@dataclass(frozen=True, slots=True)
class Observation:
    """One metric observation: a histogram value or a counter increment."""

    instrument: str
    value: float
    attributes: tuple[tuple[str, Any], ...] = ()
