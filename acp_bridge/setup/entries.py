"""Agent entries of an editor's settings: built, recognised, wrapped and unwrapped. Pure.

Owns: the editors `setup` knows and what each one reads (`EDITORS`), the entry that runs an
agent through the bridge (`build_entry`), whether an entry already goes through it
(`bridged`), `wrap` and `unwrap` (which give back exactly what was wrapped), which keys of an
entry a change touches (`changed_keys`), and the snippets printed for editors whose settings
are code. Must never: look at files, the environment or PATH (the caller passes what it
found), or change a key of an entry it does not have to.

Before (`wrap`):  {"command": "claude-agent-acp", "args": ["--x"], "env": {"K": "v"}}
After:            {"command": "/home/me/.local/bin/acp-bridge",
                   "args": ["run", "--capture", "/tmp/c.jsonl", "--", "claude-agent-acp", "--x"],
                   "env": {"K": "v"}}
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Json = dict[str, Any]

ZED, JETBRAINS = "zed", "jetbrains"
CODECOMPANION, AVANTE, AGENT_SHELL = "neovim-codecompanion", "neovim-avante", "emacs-agent-shell"
# Editors whose settings are a JSON file with `agent_servers` (written), and those whose
# settings are code (a snippet printed, never written).
WRITTEN = (ZED, JETBRAINS)
PRINTED = (CODECOMPANION, AVANTE, AGENT_SHELL)
EDITORS = WRITTEN + PRINTED
SERVERS_KEY = "agent_servers"
BRIDGE_PROGRAM = "acp-bridge"
MODULE = "acp_bridge"
RUN = "run"
SEPARATOR = "--"


@dataclass(frozen=True, slots=True)
class Bridged:
    """An entry that runs the bridge: what comes before `run` (the interpreter's `-m
    acp_bridge`), the bridge's own options, and the agent after `--` (None: the agent comes
    from a config file, or the entry is not in a form `unwrap` can undo)."""

    prefix: tuple[str, ...]
    run_args: tuple[str, ...]
    agent: tuple[str, ...] | None


def build_entry(editor: str, bridge: Sequence[str], run_args: Sequence[str], agent: Sequence[str],
                env: Json | None = None) -> Json:
    """The entry that starts `agent` through the bridge, as `editor` reads it. Zed's custom
    agents carry `"type": "custom"`; JetBrains' acp.json has no `type`."""
    entry: Json = {"type": "custom"} if editor == ZED else {}
    entry["command"] = bridge[0]
    entry["args"] = [*bridge[1:], RUN, *run_args, SEPARATOR, *agent]
    entry["env"] = dict(env or {})
    return entry


def _is_bridge_program(command: str) -> bool:
    return os.path.basename(command) == BRIDGE_PROGRAM


def _is_python(command: str) -> bool:
    name = os.path.basename(command)
    return name.startswith("python") or name == "py"


def bridged(entry: Any) -> Bridged | None:
    """The bridge's part of `entry`, or None when the entry does not start the bridge."""
    if not isinstance(entry, dict):
        return None
    command, args = entry.get("command"), entry.get("args", [])
    if not isinstance(command, str) or not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return None
    if _is_bridge_program(command):
        prefix: tuple[str, ...] = ()
    elif _is_python(command) and args[:2] == ["-m", MODULE]:
        prefix = ("-m", MODULE)
    else:
        return None
    rest = args[len(prefix):]
    if rest[:1] == [RUN]:
        prefix, rest = (*prefix, RUN), rest[1:]
    if SEPARATOR not in rest:
        return Bridged(prefix, tuple(rest), None)
    cut = rest.index(SEPARATOR)
    agent = tuple(rest[cut + 1:])
    return Bridged(prefix, tuple(rest[:cut]), agent or None)


def registry_entry(entry: Any) -> bool:
    """An entry Zed installs from the ACP registry (`"type": "registry"`), or another one that
    names no command: nothing to wrap until the user gives the command."""
    return isinstance(entry, dict) and not isinstance(entry.get("command"), str)


class CannotWrap(Exception):
    """The message says why, and what to do instead."""


def wrap(entry: Json, bridge: Sequence[str], run_args: Sequence[str], name: str, editor: str) -> Json:
    """`entry` with its command run through the bridge; its other keys (env, type, the
    editor's own) kept, in their order. Raises CannotWrap for an entry with no command."""
    if registry_entry(entry):
        kind = entry.get("type")
        what = f'"type": {json.dumps(kind)}' if isinstance(kind, str) else "no command"
        raise CannotWrap(f"{name!r} names no command ({what}: the editor installs and starts it itself); "
                         f"to run it through the bridge, give its command: "
                         f"acp-bridge setup {editor} --name {_shell_word(name)} -- COMMAND [ARG...]")
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise CannotWrap(f"{name!r}: its args are not a list of strings; left as it is")
    wrapped_args = [*bridge[1:], RUN, *run_args, SEPARATOR, entry["command"], *args]
    out: Json = {}
    for key, value in entry.items():
        if key == "command":
            out["command"] = bridge[0]
            if "args" not in entry:
                out["args"] = wrapped_args
        elif key == "args":
            out["args"] = wrapped_args
        else:
            out[key] = value
    return out


def unwrap(entry: Json, name: str) -> Json:
    """The entry `wrap` was given back: the agent's command and args from after `--`. An
    entry whose agent had no args comes back without `args` (Zed and JetBrains read a
    missing `args` as none). Raises CannotWrap when the entry does not run an agent given
    after `--`."""
    found = bridged(entry)
    if found is None:
        raise CannotWrap(f"{name!r} does not go through the bridge; nothing to unwrap")
    if found.agent is None:
        raise CannotWrap(f"{name!r} runs the bridge with no agent after `--` (the agent comes from its "
                         "config file); edit it by hand")
    command, *args = found.agent
    out: Json = {}
    for key, value in entry.items():
        if key == "command":
            out["command"] = command
        elif key == "args":
            if args:
                out["args"] = args
        else:
            out[key] = value
    return out


def changed_keys(old: Json, new: Json) -> tuple[dict[str, Any], list[str]]:
    """What turns `old` into `new`: the keys to set (new or with another value, in `new`'s
    order) and the keys to remove."""
    to_set = {key: value for key, value in new.items() if key not in old or old[key] != value}
    return to_set, [key for key in old if key not in new]


def default_name(agent: Sequence[str]) -> str:
    """The label an editor shows for an agent set up without `--name`."""
    return f"{os.path.basename(agent[0]) or agent[0]} (acp-bridge)"


def _shell_word(text: str) -> str:
    import shlex

    return shlex.quote(text)


# -- editors whose settings are code: the snippet to paste, and where --------------------

def _lua(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid Lua string literal


def _lua_list(words: Sequence[str]) -> str:
    return "{ " + ", ".join(_lua(word) for word in words) + " }"


def _elisp(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


# codecompanion's built-in ACP adapters, by the agent program they start: the one an adapter
# of the user's own extends (its other defaults, such as authentication, stay that adapter's).
_COMPANION_BASES = {"claude-agent-acp": "claude_code", "claude-code-acp": "claude_code", "codex-acp": "codex",
                    "gemini": "gemini_cli", "goose": "goose", "opencode": "opencode"}
# agent-shell's variable holding the command line of each agent it knows.
_AGENT_SHELL_VARIABLES = {"claude-agent-acp": "agent-shell-anthropic-claude-acp-command",
                          "claude-code-acp": "agent-shell-anthropic-claude-acp-command",
                          "codex-acp": "agent-shell-openai-codex-command",
                          "gemini": "agent-shell-google-gemini-command"}


def snippet(editor: str, name: str, command: Sequence[str], agent: Sequence[str]) -> tuple[str, str]:
    """(where it goes, the snippet) for an editor whose settings are code. `command` is the
    whole command line (the bridge, `run`, its options, `--`, the agent)."""
    program = os.path.basename(agent[0])
    if editor == CODECOMPANION:
        base = _COMPANION_BASES.get(program)
        note = "" if base else ("        -- replace claude_code with the built-in adapter closest to your agent\n")
        key = "".join(c if c.isalnum() else "_" for c in name).strip("_") or "bridged"
        text = (f'require("codecompanion").setup({{\n'
                f'  adapters = {{\n'
                f'    acp = {{\n'
                f'      {key} = function()\n'
                f'{note}'
                f'        return require("codecompanion.adapters").extend("{base or "claude_code"}", {{\n'
                f'          commands = {{\n'
                f'            default = {_lua_list(command)},\n'
                f'          }},\n'
                f'        }})\n'
                f'      end,\n'
                f'    }},\n'
                f'  }},\n'
                f'}})\n')
        return ("in your Neovim config, where codecompanion.nvim is set up (then pick the adapter "
                f"{key!r} in the chat)", text)
    if editor == AVANTE:
        text = (f'opts = {{\n'
                f'  provider = {_lua(name)},\n'
                f'  acp_providers = {{\n'
                f'    [{_lua(name)}] = {{\n'
                f'      command = {_lua(command[0])},\n'
                f'      args = {_lua_list(command[1:])},\n'
                f'      env = {{}},\n'
                f'    }},\n'
                f'  }},\n'
                f'}}\n')
        return "in the opts of yetone/avante.nvim in your Neovim config (merge with the opts you have)", text
    if editor == AGENT_SHELL:
        variable = _AGENT_SHELL_VARIABLES.get(program, "agent-shell-anthropic-claude-acp-command")
        words = " ".join(_elisp(word) for word in command)
        text = f"(setq {variable}\n      '({words}))\n"
        where = ("in your Emacs init file, after agent-shell is loaded"
                 + ("" if program in _AGENT_SHELL_VARIABLES else
                    f" (use the command variable of the agent-shell agent that {program} stands for)"))
        return where, text
    raise ValueError(f"no snippet for {editor}")
