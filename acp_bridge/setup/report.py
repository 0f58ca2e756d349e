"""What `acp-bridge doctor` says about an agent: the facts of its answers, what the bridge
will do for it, and each problem with its fix. Pure.

Owns: `Probe` (what the probe saw: times, the agent's answers, its stray stdout, its exit),
the predictions, made by the very functions the rules call (`choose_plan` and
`agent_system_prompt` for the system prompt's dialect, `client_form` for who gets which
suggestions) on a `Connection` holding the agent's `initialize` answer, the problems and their
fixes (`problems`), and the report as lines and as JSON. Must never: decide again what a
rule decides (it asks the rule's functions), or run anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from acp_bridge.core import protocol as p
from acp_bridge.core.printable import printable
from acp_bridge.core.rewrites.settings import SuggestionsSettings, SystemPromptSettings
from acp_bridge.core.rewrites.suggestion_shapes import LEGACY, NEW
from acp_bridge.core.rewrites.suggestions import client_form
from acp_bridge.core.rewrites.system_prompt import agent_system_prompt
from acp_bridge.core.rewrites.system_prompt_shapes import choose_plan
from acp_bridge.core.session import Connection

Json = dict[str, Any]

# Agents known to predict suggestions only for a JetBrains AIR client (by their agentInfo
# name; docs/suggestions.md): for any other client, `--unlock-legacy-agent` makes them predict.
LEGACY_PREDICTORS = ("claude-agent-acp", "codex-acp", "demo-legacy-agent")
# The clients whose suggestions the report predicts: what each puts in `initialize`.
CLIENT_KINDS: tuple[tuple[str, Json], ...] = (
    ("a client that reads the new update", {"session": {p.PROMPT_SUGGESTIONS: {}}}),
    ("JetBrains AIR", {p.META: {"jetbrains": {"air": {}}}}),
    ("a plain client", {}),
)


@dataclass(frozen=True, slots=True)
class WrongId:
    """The first answer to no request doctor sent: the request waited for (its method and
    id), the id the answer has as written, and its error's message if it is an error (an
    agent that could not read the request answers id null with a parse error)."""

    method: str
    asked: int
    written: str
    error: str | None = None


@dataclass(slots=True)
class Probe:
    """What the probe saw. Times in seconds from the start; None: it did not happen."""

    command: list[str]
    protocol: int
    started: bool = True  # False: the command could not be started (`start_error` says why)
    start_error: str | None = None
    initialize_at: float | None = None  # when the initialize answer came
    initialize: Json | None = None  # the answer, whole (a result or an error)
    session_at: float | None = None
    session: Json | None = None  # the session/new answer, whole
    closed: bool | None = None  # session/close answered (None: not sent)
    commands: list[Json] = field(default_factory=list)  # advertised commands, as the agent sent them
    stray: list[str] = field(default_factory=list)  # stdout lines that are no JSON-RPC message (the first few)
    stray_lines: int = 0  # how many there were
    not_acp: list[str] = field(default_factory=list)  # JSON lines that are not JSON-RPC 2.0 (the first few)
    exited: int | None = None  # its exit status, if it exited while the probe ran
    stderr_tail: str = ""
    timed_out: str | None = None  # what it was waiting for when --timeout ran out
    wrong_id: WrongId | None = None  # the first answer to no request doctor sent
    long_line: str | None = None  # a line too long to read came: the method doctor was waiting for
    max_line_mib: int = 16  # the longest line read


@dataclass(frozen=True, slots=True)
class Problem:
    what: str
    fix: str


def _session(probe: Probe, client_caps: Json) -> Connection:
    """A `Connection` as the relay would hold it after this client's initialize and the agent's
    answer: what the rules read their facts from."""
    session = Connection()
    key = "capabilities" if probe.protocol >= 2 else "clientCapabilities"
    session.client_init = {"protocolVersion": probe.protocol, key: client_caps}
    result = (probe.initialize or {}).get("result")
    session.agent_init = result if isinstance(result, dict) else None
    return session


def agent_result(probe: Probe) -> Json | None:
    result = (probe.initialize or {}).get("result")
    return result if isinstance(result, dict) else None


def system_prompt_dialect(probe: Probe, config: SystemPromptSettings) -> Json:
    """The dialect `choose_plan` picks for this agent, with the configured mode."""
    session = _session(probe, {})
    name = session.agent_info.get("name")
    plan = choose_plan(config, agent_system_prompt(session), name if isinstance(name, str) else None, session.v2)
    out: Json = {"dialect": plan.dialect.value, "mode": plan.mode}
    if plan.downgraded:
        out["downgraded"] = True
    if plan.error:
        out["error"] = plan.error
    return out


def legacy_predictor(probe: Probe) -> bool:
    name = _session(probe, {}).agent_info.get("name")
    return isinstance(name, str) and any(known in name for known in LEGACY_PREDICTORS)


def suggestions(probe: Probe, config: SuggestionsSettings) -> list[Json]:
    """For each kind of client: the form it gets (`client_form`), and what the bridge does."""
    out = []
    legacy = legacy_predictor(probe)
    for label, caps in CLIENT_KINDS:
        form = client_form(_session(probe, caps))
        if not config.enabled:
            does = "nothing: suggestions pass untouched (--no-suggestions)"
        elif form == NEW:
            does = ("prompt_suggestions_update only: the agent's own filtered to the content types both "
                    "accept, its legacy _meta.promptSuggestions converted")
            if legacy:
                does += ("; this agent predicts only for AIR clients, so " +
                         ("--unlock-legacy-agent (set) makes it predict" if config.unlock_legacy_agent
                          else "add --unlock-legacy-agent to get any"))
        elif form == LEGACY:
            does = ("_meta.promptSuggestions only: the agent's legacy ones passed through, its "
                    "prompt_suggestions_update converted; no unlocking needed")
        else:
            does = "none: suggestions of either form removed"
        out.append({"client": label, "form": form, "bridge": does,
                    "unlock_needed": bool(config.enabled and form == NEW and legacy
                                          and not config.unlock_legacy_agent)})
    return out


def problems(probe: Probe) -> list[Problem]:
    """What keeps an editor from using this agent, each with its fix."""
    command = probe.command[0] if probe.command else "?"
    if not probe.started:
        return [Problem(f"the agent cannot be started: {probe.start_error}",
                        f"give its full path (command -v {command}), and check that it is executable")]
    found = _output_problems(probe)
    if probe.initialize is None:
        if probe.exited is not None:
            tail = probe.stderr_tail.strip()
            found.append(Problem(
                f"it exited with status {probe.exited} before answering initialize"
                + (f"; its stderr ends: {printable(tail[-400:], quote_backslash=False)}" if tail else ""),
                "run the command by hand to see why; check its arguments, its login or API key"))
        elif probe.timed_out is not None:
            found.append(Problem(
                f"it answered nothing within the timeout ({probe.timed_out})",
                "check that the command starts the agent's ACP mode (it may be waiting for a terminal), "
                "or give it longer with --timeout"))
        return found
    error = probe.initialize.get("error")
    if error is not None:
        message = p.get_path(error, "message")
        found.append(Problem(
            f"it rejects initialize (protocol version {probe.protocol}): "
            f"{printable(str(message), quote_backslash=False)}",
            "try the other protocol version with --protocol 1 or --protocol 2, or update the agent"))
        return found
    result = agent_result(probe)
    version = p.get_path(result, "protocolVersion")
    if not isinstance(version, int) or isinstance(version, bool):
        found.append(Problem("its initialize answer has no protocolVersion",
                             "update the agent: every ACP agent answers with the version it speaks"))
    elif version != probe.protocol:
        found.append(Problem(
            f"it answers protocol version {version} to a client that asked for {probe.protocol}",
            f"clients that speak only version {probe.protocol} will disconnect; try --protocol {version}"))
    if probe.session is not None and probe.session.get("error") is not None:
        message = p.get_path(probe.session, "error", "message")
        found.append(Problem(f"session/new fails: {printable(str(message), quote_backslash=False)}",
                             "the agent may need a login or an API key in its env"))
    elif probe.timed_out is not None:
        found.append(Problem(f"it answered nothing within the timeout ({probe.timed_out})",
                             "give it longer with --timeout, or check its logs"))
    if probe.exited is not None and probe.session is None:
        found.append(Problem(f"it exited with status {probe.exited} after initialize",
                             "run the command by hand to see why"))
    return found


def _output_problems(probe: Probe) -> list[Problem]:
    """What is wrong with what the agent wrote to stdout: lines that are no protocol, JSON
    that is not JSON-RPC, an answer under another id, a line over the parse limit."""
    found: list[Problem] = []
    if probe.stray:
        found.append(Problem(
            f"it writes {probe.stray_lines} line(s) to stdout that are no protocol (first: "
            f"{printable(probe.stray[0][:200], quote_backslash=False)}); strict clients break on them",
            "run it with --stray-output stderr (in the editor's entry: acp-bridge setup EDITOR "
            "--stray-output stderr -- AGENT), or turn the banner off in the agent"))
    if probe.not_acp:
        found.append(Problem(
            f"it answers with JSON that is not JSON-RPC 2.0 (first: "
            f"{printable(probe.not_acp[0][:200], quote_backslash=False)})",
            "check that the command starts the agent's ACP mode (often a flag such as --acp or acp)"))
    if probe.wrong_id is not None:
        wrong = probe.wrong_id
        found.append(Problem(
            f"its answer to {wrong.method} did not match the request id ({wrong.asked}): it answered id "
            f"{printable(wrong.written[:200], quote_backslash=False)}" + (" ..." if len(wrong.written) > 200 else "")
            + ("" if wrong.error is None else
               f", with the error: {printable(wrong.error[:200], quote_backslash=False)}"),
            "the agent must answer each request with the request's own id, as the client wrote it "
            "(JSON-RPC 2.0); update the agent, or tell its authors"))
    if probe.long_line is not None:
        found.append(Problem(
            f"it wrote a line over {probe.max_line_mib} MiB to stdout while doctor waited for the answer to "
            f"{probe.long_line}; neither doctor nor the bridge reads a line that long (the bridge passes it "
            "on in pieces, unread)",
            "run the command by hand and see what it writes: an answer that long is the agent's fault (the "
            "limit is [relay] parse_limit_mib)"))
    return found


def as_json(probe: Probe, prompt: SystemPromptSettings, suggest: SuggestionsSettings) -> Json:
    result = agent_result(probe)
    caps = p.agent_capabilities(result) if result is not None else None
    out: Json = {
        "command": probe.command,
        "protocol_asked": probe.protocol,
        "started": probe.started,
        "initialize_seconds": probe.initialize_at,
        "session_seconds": probe.session_at,
        "agent_info": _session(probe, {}).agent_info if result is not None else None,
        "protocol_version": p.get_path(result, "protocolVersion") if result is not None else None,
        "capabilities": caps,
        "stray_stdout": probe.stray,
        "stray_stdout_lines": probe.stray_lines,
        "commands": [c.get("name") for c in probe.commands if isinstance(c, dict)],
        "session_closed": probe.closed,
        "exit_status": probe.exited,
        "problems": [{"problem": x.what, "fix": x.fix} for x in problems(probe)],
    }
    if result is not None:
        out["system_prompt"] = system_prompt_dialect(probe, prompt)
        out["suggestions"] = suggestions(probe, suggest)
    out["healthy"] = not out["problems"]
    return out


def lines(probe: Probe, prompt: SystemPromptSettings, suggest: SuggestionsSettings) -> list[str]:
    """The report for people: a few lines of facts, then each problem with its fix."""
    facts = as_json(probe, prompt, suggest)

    def show(value: Any) -> str:
        return printable(str(value), quote_backslash=False)

    out = [f"agent: {show(' '.join(probe.command))}"]
    if probe.initialize_at is not None:
        out.append(f"started and answered initialize in {probe.initialize_at:.2f} s")
    if facts["agent_info"]:
        info = facts["agent_info"]
        out.append(f"agentInfo: {show(info.get('name'))} {show(info.get('version', ''))}".rstrip())
    if facts["protocol_version"] is not None:
        out.append(f"protocol version: {show(facts['protocol_version'])} (asked for {probe.protocol})")
    if facts["capabilities"] is not None:
        import json

        out.append(f"capabilities: {show(json.dumps(facts['capabilities'], sort_keys=True))}")
    if "system_prompt" in facts:
        plan = facts["system_prompt"]
        out.append(f"system prompt: the bridge would use the {plan['dialect']} dialect (mode {plan['mode']}"
                   + (", override downgraded to append" if plan.get("downgraded") else "") + ")"
                   + (f": {plan['error']}" if plan.get("error") else ""))
    for row in facts.get("suggestions", []):
        out.append(f"suggestions for {row['client']}: {row['bridge']}")
    if probe.session_at is not None:
        out.append(f"session/new answered in {probe.session_at:.2f} s"
                   + ("" if probe.closed is None else (", closed with session/close" if probe.closed
                                                       else ", session/close not answered")))
    if probe.session is not None or probe.commands:
        names = facts["commands"]
        out.append(f"commands: {', '.join('/' + show(n) for n in names)}" if names else "commands: none advertised")
    if probe.stray:
        out.append(f"stray stdout: {probe.stray_lines} line(s)")
    for problem in facts["problems"]:
        out.append(f"problem: {problem['problem']}")
        out.append(f"  fix: {problem['fix']}")
    out.append("healthy" if facts["healthy"] else f"{len(facts['problems'])} problem(s) found")
    return out
