"""The command lines a message carries, masked as the bridge's own command line is.

Owns: where ACP puts a command line and how its secrets are masked there: a
`terminal/create`'s `command` and `args`, an MCP server's `command`, `args` and `url`
(`--token X`, `--author=X`, `API_KEY=X`, a URL's user and secret query), each read as one
argv, the command first, and the pointers of what was masked. The words themselves are
masked by `text_redaction.mask_argv` and `mask_text_secrets`; which messages are walked, and
when, is `redaction.Redactor`'s. The replay masks a live `terminal/create` with
`command_masked` to match it with the recorded one. Must never: change the message it is
handed (a masked one is a copy, made only along the path it changes), do IO, or raise on
anything read from the wire.
"""

from __future__ import annotations

from typing import Any

from acp_bridge.capture.text_redaction import mask_argv, mask_text_secrets


def command_masked(owner: dict[str, Any]) -> dict[str, Any]:
    """`owner` (a terminal's params, an MCP server) with the secrets in its `command` and
    `args` masked as the bridge's own command line is (`mask_argv`: `--token X`,
    `--author=X`, `API_KEY=X`, a URL's user, the words of a command line given in one
    string); `owner` itself when nothing is. The command and the arguments are read as one
    argv, the command first; an `args` that is not a list of strings is left as it is."""
    command = owner.get("command")
    head: list[str] = [command] if isinstance(command, str) else []
    args: list[str] = _strings(owner.get("args"))
    words = head + args
    masked = mask_argv(words)
    if masked == words:
        return owner
    changed: dict[str, Any] = {}
    if head and masked[0] != command:
        changed["command"] = masked[0]
    if masked[len(head):] != args:
        changed["args"] = masked[len(head):]
    return {**owner, **changed}


def _strings(value: Any) -> list[str]:
    """`value` when it is a list of strings, else [] (nothing of it is masked)."""
    return value if isinstance(value, list) and all(isinstance(item, str) for item in value) else []


def _command_hits(owner: dict[str, Any], masked: dict[str, Any], here: str) -> list[str]:
    """The pointers of what `command_masked` changed, under `here`."""
    hits = [f"{here}/command"] if masked.get("command") is not owner.get("command") else []
    args, new_args = _strings(owner.get("args")), _strings(masked.get("args"))
    if new_args is not args:
        hits.extend(f"{here}/args/{at}" for at, (old, arg) in enumerate(zip(args, new_args, strict=True)) if old != arg)
    return hits


def mask_terminal_command(msg: dict[str, Any], here: str, hits: list[str]) -> dict[str, Any]:
    """`msg`, a `terminal/create`, with the secrets on the command line it asks for masked;
    the pointers of what was masked (under `here`, the message's own) are added to `hits`."""
    params = msg.get("params")
    if not isinstance(params, dict):
        return msg
    masked = command_masked(params)
    if masked is params:
        return msg
    hits.extend(_command_hits(params, masked, f"{here}/params"))
    return {**msg, "params": masked}


def mask_server_commands(msg: dict[str, Any], here: str, hits: list[str]) -> dict[str, Any]:
    """`msg` with the secrets in its MCP servers' `command`, `args` and `url` masked as the
    bridge's own command line is (`--token X`, `API_KEY=X`, a URL's user and secret query);
    its params are a dict that holds `mcpServers` (the caller has checked). The pointers of
    what was masked are added to `hits`."""
    servers = msg["params"]["mcpServers"]
    if not isinstance(servers, list):
        return msg
    new: list[Any] | None = None
    for index, server in enumerate(servers):
        if not isinstance(server, dict):
            continue
        masked = command_masked(server)
        hits.extend(_command_hits(server, masked, f"{here}/params/mcpServers/{index}"))
        url = server.get("url")
        if isinstance(url, str) and (masked_url := mask_text_secrets(url)) != url:
            masked = {**masked, "url": masked_url}
            hits.append(f"{here}/params/mcpServers/{index}/url")
        if masked is not server:
            new = new if new is not None else list(servers)
            new[index] = masked
    return msg if new is None else {**msg, "params": {**msg["params"], "mcpServers": new}}
