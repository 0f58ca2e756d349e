"""An ACP conductor in the official dialect, written from the unstable schema, for tests.

    python -m tests.chain.conductor [--trace FILE] [--violations FILE] COMPONENTS

COMPONENTS is one JSON array of argv arrays: the proxies in order, then the agent. The
conductor speaks to its own stdin/stdout as the agent, starts the components (their stderr is
its stderr), sends `proxy/initialize` to each component with a successor and `initialize` to
the last, and routes: what a proxy sends plain goes to its predecessor (the client for the
first), what it sends in a `proxy/successor` envelope goes to its successor, and what a
successor sends reaches the proxy in such an envelope. Request ids are the conductor's own on
every hop; results and errors go back unchanged, and every other value byte for byte.
`$/cancel_request` is hop-local: a cancel of a request the conductor forwarded becomes a cancel
of its own request on the next hop. When a component exits, each request pending on it is
answered with the conductor's own error (`EXITED`).

Every envelope and every `proxy/initialize` the conductor sends to a proxy or receives from one
is validated against the matching definitions of both `schema/v1/schema.unstable.json` and
`schema/v2/schema.unstable.json` (ACP_SCHEMA_DIR, or `.schemas/package/schema`), but for a
`proxy/initialize`: its params are an `initialize` of one protocol version (v2's requires
`info`, which v1's has not), so protocol version 1 is checked against v1 and 2 against v2. Each failure,
and each other breach of the protocol by a component (a line that is not a JSON-RPC message, a
wrapped `$/cancel_request`, an envelope from the agent), is a violation: one stderr line
starting `conductor: VIOLATION`, a line in the --violations file, and exit status 3 at the end.
The --trace file gets one JSON line per line received or sent: `{"hop": "client" or the
component's index, "direction": "received" or "sent", "line": the line without its newline}`.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tests.chain import wire
from tests.chain.wire import Members

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = Path(os.environ.get("ACP_SCHEMA_DIR", ROOT / ".schemas" / "package" / "schema"))
SCHEMA_FILES = tuple(SCHEMA_DIR / version / "schema.unstable.json" for version in ("v1", "v2"))
EXITED = -32603  # the code of the conductor's own error when a component exits
UNROUTABLE = -32600
VIOLATION_STATUS = 3
SHUTDOWN_WAIT = 5.0  # seconds the components get to exit once the client has gone


def schemas_missing() -> str | None:
    """Why the official-dialect conductor cannot run here, or None."""
    absent = [str(path) for path in SCHEMA_FILES if not path.is_file()]
    if absent:
        return (f"ACP unstable schemas not found ({', '.join(absent)}): .ci/run fetches them with npm pack, "
                "or set ACP_SCHEMA_DIR")
    return None


class Validator:
    """The proxy definitions of both unstable schemas, compiled once."""

    DEFS = ("ProxyRequest", "ProxyNotification", "ProxyResponse", "InitializeProxyRequest",
            "ProxySuccessorRequest", "ProxySuccessorNotification")

    def __init__(self, files: Sequence[Path] = SCHEMA_FILES) -> None:
        import jsonschema  # type: ignore[import-untyped]  # the test extra has it, not its stubs

        self._validators: list[tuple[str, dict[str, Any]]] = []
        for path in files:
            defs = json.loads(path.read_text(encoding="utf-8"))["$defs"]
            compiled = {name: jsonschema.Draft202012Validator({"$ref": f"#/$defs/{name}", "$defs": defs})
                        for name in self.DEFS}
            self._validators.append((f"{path.parent.name}/{path.name}", compiled))

    def check(self, definition: str, instance: Any, version: Any = None) -> list[str]:
        """What is wrong with `instance` against `definition`, in each schema (or in the one of
        protocol `version` alone, when it is 1 or 2)."""
        problems = []
        for label, compiled in self._validators:
            if version in (1, 2) and not label.startswith(f"v{version}/"):
                continue
            for err in compiled[definition].iter_errors(instance):
                where = "/".join(str(part) for part in err.absolute_path) or "(top)"
                problems.append(f"{definition} in {label} at {where}: {err.message[:300]}")
        return problems

    def envelope(self, message: Any) -> list[str]:
        """A `proxy/*` request or notification, or a response to one (`kind` from its shape)."""
        if not isinstance(message, dict):
            return ["not an object"]
        if "method" not in message:
            return self.check("ProxyResponse", message)
        method, params = message.get("method"), message.get("params")
        if method == "proxy/initialize":  # its params are an initialize of one protocol version
            version = params.get("protocolVersion") if isinstance(params, dict) else None
            problems = self.check("ProxyRequest", message, version) + self.check("InitializeProxyRequest", params, version)
        elif "id" in message:
            problems = self.check("ProxyRequest", message) + self.check("ProxySuccessorRequest", params)
        else:
            problems = self.check("ProxyNotification", message) + self.check("ProxySuccessorNotification", params)
        if method == "proxy/successor" and isinstance(params, dict) and params.get("params") is not None \
                and not isinstance(params["params"], dict | list):
            problems.append("proxy/successor params.params: when present, MUST be a JSON object or array "
                            "(the definition's description)")
        return problems


@dataclass
class Pending:
    """A request the conductor sent on a hop: whom to answer, and under which id."""

    origin: Hop
    origin_id: str  # raw
    envelope_sent: bool  # the request on this hop is a proxy/* request to a proxy
    envelope_origin: bool  # the origin's request was a proxy/successor envelope


@dataclass(eq=False)
class Hop:
    """One connection of the conductor: the client's (index -1) or a component's."""

    index: int
    stream: IO[bytes]
    process: subprocess.Popen[bytes] | None = None
    has_successor: bool = False
    alive: bool = True
    next_id: int = 1
    pending: dict[str, Pending] = field(default_factory=dict)

    @property
    def name(self) -> str | int:
        return "client" if self.index < 0 else self.index

    @property
    def is_proxy(self) -> bool:
        return self.index >= 0 and self.has_successor


class Conductor:
    def __init__(self, commands: Sequence[Sequence[str]], trace: IO[str] | None,
                 violations: IO[str] | None) -> None:
        self.validator = Validator()
        self.trace, self.violations_file = trace, violations
        self.violations = 0
        self.events: queue.Queue[tuple[Hop, bytes | None]] = queue.Queue()
        self.client = Hop(-1, sys.stdout.buffer)
        self.components: list[Hop] = []
        for index, argv in enumerate(commands):
            process = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            assert process.stdin is not None
            self.components.append(Hop(index, process.stdin, process, has_successor=index < len(commands) - 1))
        # Each hop's requests in flight that the conductor forwarded: (hop, id there) -> (next hop, id).
        self.forwarded: dict[tuple[int, str], tuple[Hop, str]] = {}
        self._read(self.client, sys.stdin.buffer)
        for hop in self.components:
            assert hop.process is not None and hop.process.stdout is not None
            self._read(hop, hop.process.stdout)

    def _read(self, hop: Hop, stream: IO[bytes]) -> None:
        def pump() -> None:
            for line in iter(stream.readline, b""):
                self.events.put((hop, line))
            self.events.put((hop, None))

        threading.Thread(target=pump, daemon=True, name=f"read-{hop.name}").start()

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> int:
        open_hops = 1 + len(self.components)
        client_gone = False
        while open_hops:
            try:
                hop, line = self.events.get(timeout=SHUTDOWN_WAIT if client_gone else None)
            except queue.Empty:
                break  # components that outlive the wait are stopped below
            if line is None:
                open_hops -= 1
                if hop is self.client:
                    client_gone = True
                    for component in self.components:
                        _close(component.stream)
                else:
                    self.exited(hop)
                continue
            self.note(hop, "received", line)
            self.route(hop, line.decode("utf-8", "surrogateescape").rstrip("\r\n"))
        for component in self.components:
            assert component.process is not None
            _close(component.stream)
            try:
                component.process.wait(SHUTDOWN_WAIT)
            except subprocess.TimeoutExpired:
                component.process.kill()
                component.process.wait()
        if self.violations:
            print(f"conductor: {self.violations} protocol violation(s), exit {VIOLATION_STATUS}", file=sys.stderr)
            return VIOLATION_STATUS
        return 0

    def route(self, hop: Hop, text: str) -> None:
        members = wire.scan(text) if text.strip() else {}
        method = wire.value(members, "method") if members is not None else None
        if not members:
            if members is None:
                self.violation(hop, f"not a JSON-RPC message: {text[:200]!r}")
        elif method is None:
            if "id" in members:
                self.response(hop, members)
            else:
                self.violation(hop, f"not a JSON-RPC message: {text[:200]!r}")
        elif not isinstance(method, str):
            self.violation(hop, f"method is not a string: {text[:200]!r}")
        elif method == "$/cancel_request":
            self.cancel(hop, members)
        elif method == "proxy/successor" and hop.index >= 0:
            self.from_proxy(hop, members)
        elif hop is self.client:
            self.deliver(self.components[0], members, hop, wrapped=False)
        elif hop.index == 0:
            self.deliver(self.client, members, hop, wrapped=False)
        else:
            self.deliver(self.components[hop.index - 1], members, hop, wrapped=True)

    def from_proxy(self, hop: Hop, envelope: Members) -> None:
        """A `proxy/successor` request or notification: its message goes to the successor."""
        problems = self.validator.envelope(_parsed(envelope))
        for problem in problems:
            self.violation(hop, f"received envelope: {problem}")
        inner = wire.scan(wire.raw(envelope, "params") or "")
        if not hop.has_successor or inner is None or not isinstance(wire.value(inner, "method"), str):
            why = "the agent has no successor" if not hop.has_successor else "the envelope wraps no message"
            if hop.has_successor and not problems:
                self.violation(hop, f"received envelope: {why}")
            if "id" in envelope:
                self.answer(hop, envelope["id"][1], UNROUTABLE, f"conductor: {why}", True)
            return
        if wire.value(inner, "method") == "$/cancel_request":
            self.violation(hop, "received envelope: $/cancel_request is hop-local, never forwarded")
            return
        inner_request = {**inner, "id": envelope["id"]} if "id" in envelope else inner
        self.deliver(self.components[hop.index + 1], inner_request, hop, wrapped=False, envelope_origin=True)

    def deliver(self, target: Hop, members: Members, origin: Hop, *, wrapped: bool,
                envelope_origin: bool = False) -> None:
        """A request or notification from `origin`, to `target` (in an envelope if `wrapped`)."""
        method_raw, params_raw = members["method"][1], wire.raw(members, "params")
        if wrapped:
            method_raw, params_raw = '"proxy/successor"', wire.envelope_params(members)
        elif target.is_proxy and wire.value(members, "method") == "initialize":
            method_raw = '"proxy/initialize"'
        if "id" not in members:
            if target.alive:
                self.send(target, wire.notification(method_raw, params_raw), _checked(wrapped, None, members))
            return
        if not target.alive:
            self.answer(origin, members["id"][1], EXITED, _exited(target), envelope_origin)
            return
        new_id = str(target.next_id)
        target.next_id += 1
        line = wire.request(new_id, method_raw, params_raw)
        envelope_sent = target.is_proxy and method_raw in ('"proxy/successor"', '"proxy/initialize"')
        target.pending[new_id] = Pending(origin, members["id"][1], envelope_sent, envelope_origin)
        self.forwarded[(origin.index, wire.id_key(members))] = (target, new_id)
        initialize = method_raw == '"proxy/initialize"'
        self.send(target, line, _checked(wrapped or initialize, int(new_id), members, initialize))

    def response(self, hop: Hop, members: Members) -> None:
        pending = hop.pending.pop(wire.id_key(members), None)
        if pending is None:
            self.violation(hop, f"a response to no request of the conductor's: id {members['id'][1][:100]}")
            return
        if pending.envelope_sent:
            for problem in self.validator.envelope(_parsed(members)):
                self.violation(hop, f"received response to an envelope: {problem}")
        self.forwarded.pop((pending.origin.index, json.dumps(json.loads(pending.origin_id))), None)
        if pending.origin.alive:
            key = "error" if "error" in members else "result"
            checked = {"jsonrpc": "2.0", "id": json.loads(pending.origin_id), key: members[key][0]}
            self.send(pending.origin, wire.response(pending.origin_id, members),
                      checked if pending.envelope_origin else None)

    def answer(self, origin: Hop, origin_id: str, code: int, message: str, envelope_origin: bool) -> None:
        """The conductor's own error for the request `origin_id` of `origin`."""
        if origin.alive:
            checked = {"jsonrpc": "2.0", "id": json.loads(origin_id), "error": {"code": code, "message": message}}
            self.send(origin, wire.error(origin_id, code, message), checked if envelope_origin else None)

    def cancel(self, hop: Hop, members: Members) -> None:
        """`$/cancel_request` of a request `hop` sent: the same for the request it became next."""
        params = wire.value(members, "params")
        request_id = params.get("requestId") if isinstance(params, dict) else None
        target = self.forwarded.get((hop.index, json.dumps(request_id)))
        if target is not None and target[0].alive:
            self.send(target[0], wire.notification('"$/cancel_request"', f'{{"requestId":{target[1]}}}'))

    def exited(self, hop: Hop) -> None:
        """Every request pending on a component that exited gets the conductor's own error."""
        hop.alive = False
        assert hop.process is not None
        try:
            status: int | str = hop.process.wait(SHUTDOWN_WAIT)
        except subprocess.TimeoutExpired:
            status = "unknown (it closed its stdout but runs on)"
        print(f"conductor: component {hop.index} exited with status {status}", file=sys.stderr, flush=True)
        pending, hop.pending = hop.pending, {}
        for entry in pending.values():
            self.forwarded.pop((entry.origin.index, json.dumps(json.loads(entry.origin_id))), None)
            self.answer(entry.origin, entry.origin_id, EXITED, _exited(hop), entry.envelope_origin)

    # -- output --------------------------------------------------------------------------
    def send(self, hop: Hop, line: str, checked: dict[str, Any] | None = None) -> None:
        """`line` to `hop`; `checked`, the message as parsed, is validated first."""
        if checked is not None:
            for problem in self.validator.envelope(checked):
                self.violation(hop, f"sent: {problem}")
        data = line.encode("utf-8", "surrogateescape") + b"\n"
        self.note(hop, "sent", data)
        try:
            hop.stream.write(data)
            hop.stream.flush()
        except (BrokenPipeError, ValueError):
            pass  # the hop is gone; its end of file answers what is pending on it

    def note(self, hop: Hop, direction: str, data: bytes) -> None:
        if self.trace is not None:
            line = data.decode("utf-8", "surrogateescape").removesuffix("\n")
            self.trace.write(json.dumps({"hop": hop.name, "direction": direction, "line": line}) + "\n")
            self.trace.flush()

    def violation(self, hop: Hop, text: str) -> None:
        self.violations += 1
        line = f"hop {hop.name}: {text}"
        print(f"conductor: VIOLATION {line}", file=sys.stderr, flush=True)
        if self.violations_file is not None:
            self.violations_file.write(line + "\n")
            self.violations_file.flush()


def _checked(wanted: bool, new_id: int | None, members: Members, initialize: bool = False) -> dict[str, Any] | None:
    """The envelope the conductor sends for `members`, as parsed (to validate), if `wanted`."""
    if not wanted:
        return None
    message: dict[str, Any] = {"jsonrpc": "2.0"} if new_id is None else {"jsonrpc": "2.0", "id": new_id}
    if initialize:
        return {**message, "method": "proxy/initialize", "params": wire.value(members, "params")}
    inner = {"method": wire.value(members, "method")}
    if "params" in members:
        inner["params"] = wire.value(members, "params")
    return {**message, "method": "proxy/successor", "params": inner}


def _parsed(members: Members) -> dict[str, Any]:
    return {key: parsed for key, (parsed, _) in members.items()}


def _exited(hop: Hop) -> str:
    return f"conductor: component {hop.index} exited"


def _close(stream: IO[bytes]) -> None:
    try:
        stream.close()
    except OSError:
        pass


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chain.conductor", description=__doc__.split("\n")[0])
    parser.add_argument("--trace", type=Path, help="write every line received and sent here (JSON lines)")
    parser.add_argument("--violations", type=Path, help="write each protocol violation here, one a line")
    parser.add_argument("components", help="a JSON array of argv arrays: the proxies, then the agent")
    args = parser.parse_args(argv)
    missing = schemas_missing()
    if missing:
        print(f"conductor: {missing}", file=sys.stderr)
        return 2
    commands = json.loads(args.components)
    trace = args.trace.open("a", encoding="utf-8") if args.trace else None
    violations = args.violations.open("a", encoding="utf-8") if args.violations else None
    return Conductor(commands, trace, violations).run()


if __name__ == "__main__":
    sys.exit(main())
