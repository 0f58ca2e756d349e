"""Secrets in captures, shared by the export's tests (test_html_rows, test_redaction) and the
servers' hostile captures (hostile.py): those a capture may hold in clear, and lines holding a
secret that no parse can mask precisely."""

from __future__ import annotations

import pytest

from tests.capture.samples import update

SECRET_NEW = {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/", "mcpServers": [
    {"name": "m", "command": "c", "args": [], "env": [{"name": "K", "value": "hunter2"}]}]}}


# Secrets a capture may hold in clear, as (pointers, message, raw line or None: the message's,
# what the masked line shows, the pointers masked); the servers' tests serve them too.
IN_CLEAR = [
    pytest.param((), SECRET_NEW, None, '"value":"<redacted>"', ["/params/mcpServers/0/env/0/value"],
                 id="a-default-secret"),
    pytest.param((), {"id": 3}, '{"jsonrpc":"2.0","id":3,"method":"auth\\/login","params":{"k":"hunter2"}}\n',
                 '"params":{"k":"<redacted>"}', ["/params/k"], id="a-masked-method-spelled-with-an-escape"),
    pytest.param(("/params/key",), update("plan", key="x"),
                 '{"jsonrpc":"2.0","method":"n","params":{"k\\u0065y":"hunter2"}}\n',
                 '"params":{"key":"<redacted>"}', ["/params/key"], id="a-pointer-spelled-with-an-escape"),
    pytest.param(("/params/cl\u00e9",), update("plan"), '{"jsonrpc":"2.0","method":"n","params":{"cl\\u00E9":"hunter2"}}\n',
                 '"params":{"cl\u00e9":"<redacted>"}', ["/params/cl\u00e9"], id="a-pointer-beyond-ascii"),
    pytest.param((), {"jsonrpc": "2.0", "id": 4, "method": "terminal/create", "params": {
        "sessionId": "s", "command": "git", "args": ["log", "--author=hunter2", "--token", "hunter2"]}}, None,
        '"args":["log","--author=<redacted>","--token","<redacted>"]', ["/params/args/1", "/params/args/3"],
        id="a-terminal-command-line"),
    pytest.param(('/params/a"b"c',), update("plan"), '{"jsonrpc":"2.0","method":"n","params":{"a\\"b\\u0022c":"hunter2"}}\n',
                 '"params":{"a\\"b\\"c":"<redacted>"}', ['/params/a"b"c'], id="a-pointer-with-two-quotes-escaped-two-ways"),
]


SECRET = "S3CR3T"


AUTH = b'{"jsonrpc":"2.0","id":1,"method":"authenticate","params":{"methodId":"k","token":"S3CR3T"'
NEW = (b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[{"name":"m",'
       b'"command":"c","args":[],"env":[{"name":"K","value":"S3CR3T"}]}]')


# Lines holding a secret that no parse can mask precisely (the servers' tests serve them too).
UNMASKABLE = [
    pytest.param(AUTH + b',"x":"\\ud83d"}}\n', id="lone-surrogate"),
    pytest.param(AUTH + b',"x":NaN}}\n', id="nan"),
    pytest.param(NEW + b',"x":Infinity}}\n', id="infinity-mcp"),
    pytest.param(AUTH + b',"x":"\xff"}}\n', id="invalid-utf8"),
    pytest.param(AUTH + b"\n", id="torn"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"\\u0061uthenticate","params":{"token":"S3CR3T"},"n":NaN}\n',
                 id="escaped-method"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"auth\\/login","params":{"token":"S3CR3T"},"n":NaN}\n',
                 id="escaped-slash"),
    pytest.param(b'    "env": [{"name": "K", "value": "S3CR3T"}],\n', id="pretty-printed-fragment"),
    pytest.param(b'{"jsonrpc":"2.0","id":3,"method":"terminal/create","params":{"env":[{"name":"K","value":'
                 b'"S3CR3T"}],"x":"\\udc00"}}\n', id="terminal-create"),
]
