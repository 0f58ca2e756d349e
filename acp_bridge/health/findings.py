"""Findings: what the protocol watchdog and `acp-bridge check` report, and their codes.

Owns: the stable finding codes with their level, a one-line meaning and what to do about
it (docs/health.md lists the same; a test keeps the two in step). The `Finding` record
itself lives in the core (`core.findings`), below health and telemetry, which both take
it; it is re-exported here. Must never: decide when a finding happens (the engine
does) or do IO.
"""

from __future__ import annotations

from typing import NamedTuple

from acp_bridge.core.findings import Finding as Finding
from acp_bridge.core.findings import Level as Level


class Code(NamedTuple):  # a NamedTuple: cheaper to define than a dataclass, and `run` imports this
    code: str
    level: Level
    meaning: str
    advice: str


_ALL = (
    Code("request-unanswered", Level.WARNING,
         "a client request got no answer from the agent within its threshold",
         "the agent is stuck or lost the request; look at the agent's log around that time "
         "(raise [health] request_seconds or methods.<method> if the method is slow by nature)"),
    Code("prompt-stalled", Level.WARNING,
         "a session/prompt is unanswered and the agent has written nothing for the prompt threshold",
         "the turn is stuck (a hung tool, a lost model call); [health] prompt_seconds sets the silence allowed"),
    Code("client-request-unanswered", Level.WARNING,
         "an agent request to the client (fs, terminal, ...) got no answer within its threshold",
         "the client does not implement the method or lost the request; it must answer every "
         "request, with an error if it cannot serve it"),
    Code("cancel-ignored", Level.WARNING,
         "session/cancel was not followed by the turn ending with stopReason cancelled within the threshold",
         "the agent must end a cancelled turn with stopReason \"cancelled\" (v1: the prompt's "
         "response; v2: an idle state_update); [health] cancel_seconds sets the time allowed"),
    Code("response-unknown-id", Level.ERROR,
         "a response carries an id that no request in flight from the other side has",
         "the sender answers requests it was never sent, or changes their ids (1 and \"1\" differ)"),
    Code("response-duplicate", Level.ERROR,
         "a second response for an id that was already answered",
         "the sender answers one request twice; the peer may take the second for another request"),
    Code("request-id-reused", Level.ERROR,
         "a request reuses the id of a request from the same side that is still in flight",
         "ids must be unique among a side's requests in flight (JSON-RPC 2.0); use a counter"),
    Code("update-unknown-session", Level.WARNING,
         "a session/update names a session that was never created, loaded or resumed on this connection",
         "the agent sends updates for a session id the client does not know (a stale or made-up id)"),
    Code("update-closed-session", Level.WARNING,
         "a session/update arrived for a session after session/close succeeded",
         "the agent must stop sending updates for a closed session"),
    Code("update-malformed", Level.ERROR,
         "a session/update without params.sessionId or params.update (an object)",
         "the agent sends updates clients must reject (ACP schema: SessionNotification)"),
    Code("response-result-and-error", Level.ERROR,
         "a response has both result and error",
         "JSON-RPC 2.0 allows exactly one of them; the peer may read either"),
    Code("v1-shape-on-v2", Level.WARNING,
         "a v1 shape on a connection that negotiated protocol version 2",
         "the peer was not migrated fully (v1 capability keys, methods or update kinds removed in v2)"),
    Code("legacy-suggestions", Level.INFO,
         "the agent sent prompt suggestions in the legacy form (session_info_update _meta.promptSuggestions)",
         "the bridge converts them; once the agent sends prompt_suggestions_update, this stops"),
    Code("suggestions-unadvertised", Level.INFO,
         "the agent sent prompt_suggestions_update to a client that never advertised session.promptSuggestions",
         "the bridge converts or drops them; without it a strict v1 client would reject the update"),
    Code("air-only-client", Level.INFO,
         "the client carries the JetBrains AIR marker but not session.promptSuggestions",
         "it reads only the legacy suggestion form; the bridge converts the new form for it"),
    Code("system-prompt-fallback", Level.INFO,
         "the configured system prompt went through _meta or the first prompt, because the agent "
         "does not advertise the systemPrompt capability",
         "the agent needs the bridge's dialect until it advertises systemPrompt"),
    Code("stray-output", Level.WARNING,
         "the agent wrote a line to stdout that is not a JSON object (a banner, a log line, a "
         "shell's echo) (`check` only; live, the bridge warns on stderr)",
         "agents must log to stderr: a strict client may fail on such a line; [relay] "
         "stray_output = \"stderr\" keeps such lines from the client"),
    Code("rule-failed", Level.ERROR,
         "a rule raised, or what the rules made of a message cannot be written back (nested too "
         "deep); the message went on as it came, unchanged (verdict error in the capture); one "
         "finding per rule, with every failure counted",
         "fix the rule it names (`acp-bridge replay CAPTURE --rules --strict -vv` stops at its first "
         "failure, with the traceback); until then it does nothing for such messages. One that names "
         "no rule is a message nested too deep for any change to it to be written back"),
    Code("schema-invalid", Level.ERROR,
         "a message does not validate against the official ACP JSON schema of the negotiated "
         "version (only `check --schema`)",
         "fix the sender; the message names the schema path that failed"),
)
CODES: dict[str, Code] = {code.code: code for code in _ALL}
