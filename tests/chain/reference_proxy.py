"""The smallest correct ACP proxy, in either dialect, for the chain harness's own tests.

    python -m tests.chain.reference_proxy [--bad-meta]

The first message decides the dialect: `proxy/initialize` is the official one (envelopes are
`proxy/successor`), `initialize` with `params._meta.proxy: true` the older sacp one (envelopes
are `_proxy/successor/request` and `_proxy/successor/notification`, and the initialize answer
carries `_meta.proxy: true`). Everything is forwarded: a plain message (from the predecessor)
goes on wrapped toward the successor, a wrapped one (from the successor) goes on plain; each
request it forwards gets its own id, and the answer goes back under the sender's. Params,
results and errors go on byte for byte; `$/cancel_request` is hop-local (a cancel of a request
it forwarded becomes a cancel of its own). With `--bad-meta`, every envelope it sends carries
`"_meta": "bad"`, which the schemas forbid: for testing the conductor's validation. Stdlib only.
"""

from __future__ import annotations

import json
import sys

from tests.chain import wire
from tests.chain.wire import Members

OFFICIAL = {"request": '"proxy/successor"', "notification": '"proxy/successor"'}
SACP = {"request": '"_proxy/successor/request"', "notification": '"_proxy/successor/notification"'}
ENVELOPES = {"proxy/successor", "_proxy/successor/request", "_proxy/successor/notification"}


class Proxy:
    def __init__(self, bad_meta: bool) -> None:
        self.meta = '"bad"' if bad_meta else None
        self.dialect: dict[str, str] | None = None
        self.next_id = 1
        # id of a request this proxy sent -> (id of the request it came from, an initialize?)
        self.pending: dict[str, tuple[str, bool]] = {}  # keyed by the raw id ("p1")
        self.forwarded: dict[str, str] = {}  # id key of a request from the predecessor -> own id

    def handle(self, text: str) -> None:
        message = wire.scan(text)
        if message is None:
            return
        method = wire.value(message, "method")
        if self.dialect is None:
            sacp = method == "initialize" and ((wire.value(message, "params") or {}).get("_meta") or {}).get("proxy")
            self.dialect = SACP if sacp else OFFICIAL
        if method is None:
            self.answer(message)
        elif method in ENVELOPES:
            inner = wire.scan(wire.raw(message, "params") or "")
            if inner is not None and "method" in inner:
                self.forward(inner if "id" not in message else {**inner, "id": message["id"]}, wrapped=False)
        elif method == "$/cancel_request":
            own = self.forwarded.get(json.dumps((wire.value(message, "params") or {}).get("requestId")))
            if own is not None:
                write(wire.notification('"$/cancel_request"', f'{{"requestId":{own}}}'))
        else:
            if method == "proxy/initialize":
                message = {**message, "method": ("initialize", '"initialize"')}
            self.forward(message, wrapped=True)

    def forward(self, message: Members, *, wrapped: bool) -> None:
        """Toward the successor in an envelope if `wrapped`, else plain toward the predecessor."""
        assert self.dialect is not None
        kind = "request" if "id" in message else "notification"
        method_raw, params_raw = message["method"][1], wire.raw(message, "params")
        if wrapped:
            method_raw, params_raw = self.dialect[kind], wire.envelope_params(message, self.meta)
        if kind == "notification":
            write(wire.notification(method_raw, params_raw))
            return
        own = f'"p{self.next_id}"'  # strings, unlike the conductor's ids: a trace shows whose an id is
        self.next_id += 1
        self.pending[own] = (message["id"][1], wire.value(message, "method") == "initialize")
        if wrapped:
            self.forwarded[wire.id_key(message)] = own
        write(wire.request(own, method_raw, params_raw))

    def answer(self, message: Members) -> None:
        entry = self.pending.pop(wire.id_key(message), None)  # `"p1"`, as the raw id
        if entry is None:
            return
        origin, initialize = entry
        self.forwarded = {key: own for key, own in self.forwarded.items() if own != wire.raw(message, "id")}
        if initialize and self.dialect is SACP and isinstance(wire.value(message, "result"), dict):
            result = wire.value(message, "result")
            result["_meta"] = {**(result.get("_meta") or {}), "proxy": True}
            message = {**message, "result": (result, json.dumps(result))}
        write(wire.response(origin, message))


def write(line: str) -> None:
    sys.stdout.buffer.write(line.encode("utf-8", "surrogateescape") + b"\n")
    sys.stdout.buffer.flush()


def main() -> None:
    proxy = Proxy("--bad-meta" in sys.argv[1:])
    for line in iter(sys.stdin.buffer.readline, b""):
        proxy.handle(line.decode("utf-8", "surrogateescape").rstrip("\r\n"))


if __name__ == "__main__":
    main()
