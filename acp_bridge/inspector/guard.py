"""The inspector's door: what a request must show before it reaches a capture.

Captures hold prompts, code and whatever redaction could not know, and a page in any other
tab of the same browser can send requests to 127.0.0.1. So every request, whatever its path
(unknown paths included), must come with:

- a `Host` header naming the address the server is bound to: a name an attacker's DNS points
  at 127.0.0.1 (DNS rebinding) is refused (421). Bound to every address (`0.0.0.0`, `::`),
  any IP address with the port will do, and `localhost`: a browser writes an address in
  `Host` only for a page it loaded from that address, so no DNS is involved, and the server
  has no one address of its own to ask for;
- no `Origin`, or the page's own (`http://` and that `Host`), and no `Sec-Fetch-Site:
  cross-site` or `same-site` (another port of the same machine is the same site) (403);
- GET or HEAD: the inspector changes nothing (405);
- the random token, as the `token` query parameter or the cookie the page gets on its first
  visit (HttpOnly, SameSite=Strict), compared in constant time (401 without it).

Every answer carries a Content-Security-Policy that lets the page load its own scripts, styles
and API and nothing from anywhere else. Must never: let a request through before all four
checks passed, or echo the token anywhere but in that cookie.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Sequence
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; "
       "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
SAFE_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]


def host_header(host: str, port: int) -> str:
    """`host:port` as a browser writes it in `Host` (an IPv6 address in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _names_an_address(host: str, port: int) -> bool:
    """Is `host` (a `Host` header) an IP address, or `localhost`, with `port`?"""
    name, colon, given = host.rpartition(":")
    if not colon or given != str(port):
        return False
    if name == "localhost":
        return True
    if name.startswith("[") and name.endswith("]"):  # IPv6, as a browser writes it
        name = name[1:-1]
    elif ":" in name:
        return False
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class Guard:
    """ASGI middleware: the four checks, then the app, with the safe headers on every answer."""

    def __init__(self, app: ASGIApp, *, token: str, host: str, port: int, loopback: bool,
                 every_address: bool = False) -> None:
        self.app = app
        self.token = token.encode()
        bound = host_header(host, port)
        # `localhost` is no name an attacker can point elsewhere; any other must be the address
        self.hosts = frozenset({bound, f"localhost:{port}"} if loopback else {bound})
        self.port = port
        self.any_address = every_address  # then any of this machine's: `_names_an_address`
        self.cookie = f"acp_bridge_ui_{port}"  # cookies ignore ports: one per inspector

    def __repr__(self) -> str:
        return f"<Guard hosts={sorted(self.hosts)!r}>"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websockets
            await send({"type": "websocket.close", "code": 1008})
            return
        headers: dict[bytes, bytes] = {}
        for key, value in scope["headers"]:
            headers.setdefault(key.lower(), value)
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            status, text = refusal
            await _answer(send, status, text)
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if "token" in query and scope["path"] == "/":
            # first visit: the token moves into a cookie and out of the address bar
            cookie = f"{self.cookie}={self.token.decode()}; HttpOnly; SameSite=Strict; Path=/"
            await _answer(send, 303, "", [(b"location", b"/"), (b"set-cookie", cookie.encode())])
            return

        async def send_safe(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SAFE_HEADERS]}
            await send(message)

        await self.app(scope, receive, send_safe)

    def _refusal(self, scope: Scope, headers: dict[bytes, bytes]) -> tuple[int, str] | None:
        host = headers.get(b"host", b"").decode("latin-1")
        if host not in self.hosts and not (self.any_address and _names_an_address(host, self.port)):
            return 421, "unknown Host: this inspector answers only to the address it is bound to"
        origin = headers.get(b"origin")
        if origin is not None and origin.decode("latin-1") != f"http://{host}":
            return 403, "requests from other sites are refused"
        # same-site: a page on another port of this machine (a site ignores ports), which the
        # SameSite=Strict cookie goes with; the inspector's own page is same-origin
        if headers.get(b"sec-fetch-site") in (b"cross-site", b"same-site"):
            return 403, "requests from other sites are refused"
        if scope["method"] not in ("GET", "HEAD"):
            return 405, "read-only: GET and HEAD only"
        if not self._has_token(scope, headers):
            return 401, "the token is missing or wrong: open the address acp-bridge ui printed"
        return None

    def _has_token(self, scope: Scope, headers: dict[bytes, bytes]) -> bool:
        given: list[bytes] = []
        for key, value in parse_qsl(scope.get("query_string", b"").decode("latin-1")):
            if key == "token":
                given.append(value.encode("latin-1", "replace"))
        if b"cookie" in headers:
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(headers[b"cookie"].decode("latin-1"))
            except Exception:  # a malformed Cookie header is no token
                jar = SimpleCookie()
            if self.cookie in jar:
                given.append(jar[self.cookie].value.encode("latin-1", "replace"))
        matches = [hmac.compare_digest(value, self.token) for value in given]  # each in constant time
        return any(matches)


async def _answer(send: Send, status: int, text: str, extra: Sequence[tuple[bytes, bytes]] = ()) -> None:
    body = text.encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), *extra, *SAFE_HEADERS]})
    await send({"type": "http.response.body", "body": body})
