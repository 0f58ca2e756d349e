"""`acp-bridge setup` through the real click group, on copies of realistic settings files:
the dry run writes nothing, --write changes the file once (a second run changes nothing),
wrap and unwrap give the file back byte for byte, and bad input leaves the file as it was."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import json5
import pytest

from acp_bridge.commands.setup import bridge_command
from tests.cli_helpers import without_package
from tests.conftest import invoke

FILES = Path(__file__).parent.parent / "setup" / "files"
ZED = (FILES / "zed_default.json").read_bytes()
JETBRAINS = (FILES / "jetbrains_acp.json").read_bytes()
PYTHON = os.path.abspath(sys.executable)


@pytest.fixture
def zed(tmp_path: Path) -> Path:
    path = tmp_path / "settings.json"
    path.write_bytes(ZED)
    return path


def files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_the_dry_run_prints_the_entry_and_the_diff_and_writes_nothing(zed: Path) -> None:
    done = invoke(["setup", "zed", "--settings", str(zed), "--", PYTHON, "-m", "agent"])
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    bridge = bridge_command()
    assert f"'python{sys.version_info.major}" in out or "(acp-bridge)" in out
    assert f'+      "command": "{bridge[0]}",\n' in out
    assert f'+      "args": [{", ".join(f"{w!r}".replace(chr(39), chr(34)) for w in [*bridge[1:], "run", "--", PYTHON, "-m", "agent"])}],\n' in out
    assert out.startswith(f"'{os.path.basename(PYTHON)} (acp-bridge)': ")
    assert "(not written: add --write to change" in out
    assert zed.read_bytes() == ZED and files_in(zed.parent) == ["settings.json"]


def test_write_adds_the_entry_once_and_a_second_run_changes_nothing(zed: Path) -> None:
    args = ["setup", "zed", "--settings", str(zed), "--name", "Mine", "--write", "--", PYTHON, "-m", "agent"]
    done = invoke(args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().endswith(f"added 'Mine' in {zed}; the original is kept in {zed}.acp-bridge.bak\n")
    written = zed.read_bytes()
    entry = json5.loads(written.decode())["agent_servers"]["Mine"]
    assert entry == {"type": "custom", "command": bridge_command()[0],
                     "args": [*bridge_command()[1:], "run", "--", PYTHON, "-m", "agent"], "env": {}}
    assert (zed.parent / "settings.json.acp-bridge.bak").read_bytes() == ZED
    again = invoke(args)
    assert again.returncode == 0 and again.stdout.decode().endswith(f"{zed}: nothing to change\n")
    assert zed.read_bytes() == written


def test_wrap_then_unwrap_gives_the_file_back_byte_for_byte(zed: Path) -> None:
    wrapped = invoke(["setup", "zed", "--settings", str(zed), "--wrap", "My agent", "--capture", "cap.jsonl",
                      "--write"])
    assert wrapped.returncode == 0, wrapped.stderr
    entry = json5.loads(zed.read_text(encoding="utf-8"))["agent_servers"]["My agent"]
    assert entry == {"type": "custom", "command": bridge_command()[0],
                     "args": [*bridge_command()[1:], "run", "--capture", os.path.abspath("cap.jsonl"), "--",
                              "my-agent", "--acp"],
                     "env": {"MY_AGENT_KEY": "k-123"}}
    assert '"env": {"MY_AGENT_KEY": "k-123"}, // the key it needs\n' in zed.read_text(encoding="utf-8")
    unwrapped = invoke(["setup", "zed", "--settings", str(zed), "--unwrap", "My agent", "--write"])
    assert unwrapped.returncode == 0, unwrapped.stderr
    assert zed.read_bytes() == ZED


def test_wrap_all_skips_a_registry_entry_saying_how_to_wrap_it(zed: Path) -> None:
    done = invoke(["setup", "zed", "--settings", str(zed), "--wrap", "--all", "--write"])
    assert done.returncode == 0
    assert "'claude-acp' names no command (\"type\": \"registry\"" in done.stderr.decode()
    assert "acp-bridge setup zed --name claude-acp -- COMMAND [ARG...]" in done.stderr.decode()
    servers = json5.loads(zed.read_text(encoding="utf-8"))["agent_servers"]
    assert servers["claude-acp"] == {"type": "registry"}
    assert servers["My agent"]["command"] == bridge_command()[0]
    second = invoke(["setup", "zed", "--settings", str(zed), "--wrap", "--all", "--write"])
    assert "'My agent' already goes through the bridge" in second.stdout.decode()
    back = invoke(["setup", "zed", "--settings", str(zed), "--unwrap", "--all", "--write"])
    assert back.returncode == 0 and zed.read_bytes() == ZED


@pytest.mark.parametrize("flag", ["--wrap", "--unwrap"])
def test_a_requested_entry_that_is_not_there_is_exit_1(zed: Path, flag: str) -> None:
    done = invoke(["setup", "zed", "--settings", str(zed), flag, "Nope", "--write"])
    assert done.returncode == 1
    assert done.stderr.decode() == (f"acp-bridge: setup: no agent entry 'Nope' in {zed} "
                                    "(there: 'claude-acp', 'My agent')\n")
    assert zed.read_bytes() == ZED


def test_a_file_that_does_not_parse_is_exit_2_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_bytes(b'{\n  "theme": "x",\n  "agent_servers": {\n    "a" {}\n  }\n}\n')
    before = path.read_bytes()
    done = invoke(["setup", "zed", "--settings", str(path), "--write", "--", PYTHON])
    assert done.returncode == 2
    assert done.stderr.decode().startswith(f"acp-bridge: setup: {path}:4: Syntax Error. Was expecting COLON")
    assert path.read_bytes() == before and files_in(tmp_path) == ["settings.json"]


def test_a_missing_file_is_made_only_with_write(tmp_path: Path) -> None:
    path = tmp_path / "new" / "acp.json"
    dry = invoke(["setup", "jetbrains", "--settings", str(path), "--", PYTHON])
    assert dry.returncode == 0 and not path.parent.exists()
    done = invoke(["setup", "jetbrains", "--settings", str(path), "--write", "--", PYTHON])
    assert done.returncode == 0, done.stderr
    assert json5.loads(path.read_text(encoding="utf-8")) == {"agent_servers": {
        f"{os.path.basename(PYTHON)} (acp-bridge)": {"command": bridge_command()[0],
                                                     "args": [*bridge_command()[1:], "run", "--", PYTHON],
                                                     "env": {}}}}


def test_jetbrains_acp_json_gets_its_entry_without_a_type(tmp_path: Path) -> None:
    path = tmp_path / "acp.json"
    path.write_bytes(JETBRAINS)
    done = invoke(["setup", "jetbrains", "--settings", str(path), "--name", "B", "--write", "--", PYTHON])
    assert done.returncode == 0, done.stderr
    servers = json5.loads(path.read_text(encoding="utf-8"))["agent_servers"]
    assert list(servers) == ["Example Agent", "B"] and "type" not in servers["B"]
    assert path.read_text(encoding="utf-8").startswith(JETBRAINS.decode().split('      "use_idea_mcp"')[0])


def test_a_symlinked_settings_file_is_edited_at_its_target(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "zed.json"
    real.parent.mkdir()
    real.write_bytes(ZED)
    link = tmp_path / "settings.json"
    link.symlink_to(real)
    done = invoke(["setup", "zed", "--settings", str(link), "--name", "S", "--write", "--", PYTHON])
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert "S" in json5.loads(real.read_text(encoding="utf-8"))["agent_servers"]
    assert (real.parent / "zed.json.acp-bridge.bak").read_bytes() == ZED
    assert f"(the file {real})" in done.stdout.decode()


def test_run_options_go_into_the_entry_with_absolute_paths_and_not_from_the_environment(
        zed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACP_BRIDGE_CAPTURE", "/from/env.jsonl")
    done = invoke(["setup", "zed", "--settings", str(zed), "--name", "R", "--write", "-c", "b.toml",
                   "--system-prompt-file", "p.md", "--stray-output", "stderr", "-vv", "--strict", "--", PYTHON])
    assert done.returncode == 0, done.stderr
    args = json5.loads(zed.read_text(encoding="utf-8"))["agent_servers"]["R"]["args"]
    assert args == [*bridge_command()[1:], "run", "--config", os.path.abspath("b.toml"), "--system-prompt-file",
                    os.path.abspath("p.md"), "--stray-output", "stderr", "--strict", "-vv", "--", PYTHON]


def test_an_agent_not_on_path_is_said_and_written_as_given(zed: Path) -> None:
    done = invoke(["setup", "zed", "--settings", str(zed), "--", "no-such-agent-xyz", "--acp"])
    assert done.returncode == 0
    assert "'no-such-agent-xyz' is not on PATH; written as given" in done.stderr.decode()
    assert '"--", "no-such-agent-xyz", "--acp"]' in done.stdout.decode()


@pytest.mark.parametrize(("editor", "needle"), [
    ("neovim-codecompanion", 'require("codecompanion.adapters").extend('),
    ("neovim-avante", "acp_providers = {"),
    ("emacs-agent-shell", "(setq agent-shell-"),
])
def test_editors_whose_settings_are_code_get_a_snippet_and_nothing_is_written(editor: str, needle: str) -> None:
    done = invoke(["setup", editor, "--", PYTHON])
    assert done.returncode == 0, done.stderr
    assert needle in done.stdout.decode() and done.stdout.decode().startswith("Paste this ")
    refused = invoke(["setup", editor, "--write", "--", PYTHON])
    assert refused.returncode == 2 and "the snippet is printed to paste" in refused.stderr.decode()


def test_the_snippet_comes_under_one_heading_line_and_a_blank_line() -> None:
    done = invoke(["setup", "emacs-agent-shell", "--", "/n/codex-acp"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines()[:3] == [
        "Paste this in your Emacs init file, after agent-shell is loaded:", "",
        "(setq agent-shell-openai-codex-command"]


@pytest.mark.parametrize("args", [
    ["setup", "zed"],
    ["setup", "zed", "--wrap"],
    ["setup", "zed", "--all"],
    ["setup", "zed", "--wrap", "a", "--unwrap", "b"],
    ["setup", "zed", "--unwrap", "a", "--capture", "c"],
    ["setup", "vscode", "--", "a"],
])
def test_usage_errors_are_exit_2(args: list[str]) -> None:
    assert invoke(args).returncode == 2


def test_without_the_library_setup_says_how_to_get_it(zed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    without_package("json5", monkeypatch)
    done = invoke(["setup", "zed", "--settings", str(zed), "--", PYTHON])
    assert done.returncode == 2
    assert done.stderr.decode() == (
        "acp-bridge: setup: acp-bridge setup edits the settings with json-five, which is not installed "
        "(json5.model not found): pip install 'acp-bridge-proxy[setup]' (in a clone: pip install '.[setup]')\n")


def test_the_wrap_dry_run_says_the_entry_it_would_write(zed: Path) -> None:
    done = invoke(["setup", "zed", "--settings", str(zed), "--wrap", "My agent"])
    assert done.returncode == 0
    assert done.stdout.decode().splitlines()[0] == f"'My agent': {' '.join(bridge_command())} run -- my-agent --acp"
    assert zed.read_bytes() == ZED


def test_an_entry_on_one_line_with_trailing_commas_comes_back_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    original = b'{\n  "agent_servers": {\n    "A": {"command": "a", "args": ["--acp",], "env": {}}, // mine\n  },\n}\n'
    path.write_bytes(original)
    assert invoke(["setup", "zed", "--settings", str(path), "--wrap", "A", "--write"]).returncode == 0
    assert path.read_bytes() == original.replace(
        b'"command": "a", "args": ["--acp",]',
        f'"command": "{bridge_command()[0]}", "args": [{"".join(f"{chr(34)}{w}{chr(34)}, " for w in bridge_command()[1:])}"run", "--", "a", "--acp",]'.encode())
    assert invoke(["setup", "zed", "--settings", str(path), "--unwrap", "A", "--write"]).returncode == 0
    assert path.read_bytes() == original


def test_a_path_under_a_tilde_goes_into_the_entry_as_the_home_folder(
        zed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Quoted, `'~/caps/...'` reached setup as it was typed and went in as `$PWD/~/caps/...`."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    done = invoke(["setup", "zed", "--settings", str(zed), "--name", "R", "--write", "--capture",
                   "~/caps/{time}.jsonl", "--", PYTHON])
    assert done.returncode == 0, done.stderr
    args = json5.loads(zed.read_text(encoding="utf-8"))["agent_servers"]["R"]["args"]
    assert args == [*bridge_command()[1:], "run", "--capture", f"{tmp_path}/home/caps/{{time}}.jsonl", "--", PYTHON]


@pytest.mark.parametrize(("text", "message"), [
    ('{"agent_servers": []}', "agent_servers is not an object"),
    ('{"agent_servers": null}', "agent_servers is not an object"),
    ('{"x": ' + "[" * 1000 + "]" * 1000 + ', "agent_servers": {"A": {"command": "a"}}}', "nested too deep"),
])
@pytest.mark.parametrize("command", [["setup", "zed", "--wrap", "A"], ["doctor", "--editor", "zed"]])
def test_a_file_setup_cannot_edit_is_refused_with_exit_2_and_a_message(tmp_path: Path, text: str, message: str,
                                                                        command: list[str]) -> None:
    path = tmp_path / "settings.json"
    path.write_text(text, encoding="utf-8")
    done = invoke([*command, "--settings", str(path)])
    assert done.returncode == 2 and done.stdout == b""
    assert done.stderr.decode() == (f"acp-bridge: {command[0]}: {path}: {message}"
                                    f"{' to read' if 'deep' in message else ''}; the file is left as it is\n")
    assert path.read_text(encoding="utf-8") == text


def test_surrogate_escapes_in_an_entry_are_wrapped_and_unwrapped_byte_for_byte(tmp_path: Path) -> None:
    """A pair of `\\uXXXX` escapes is one astral character (as the editor reads it); a lone one
    stays an escape: neither can be written as UTF-8 text."""
    path = tmp_path / "settings.json"
    text = '{\n  "agent_servers": {\n    "A": {\n      "command": "my-\\ud83d\\ude00agent",\n      "args": ["\\ud800"],\n    },\n  },\n}\n'
    path.write_text(text, encoding="utf-8")
    dry = invoke(["setup", "zed", "--settings", str(path), "--wrap", "A"])
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.decode().startswith("'A': " + bridge_command()[0] + " run -- 'my-\U0001f600agent' '\\ud800'\n")
    done = invoke(["setup", "zed", "--settings", str(path), "--wrap", "A", "--write"])
    assert done.returncode == 0, done.stderr
    assert '"args": ["run", "--", "my-\U0001f600agent", "\\ud800"],' in path.read_text(encoding="utf-8")
    assert json5.loads(path.read_text(encoding="utf-8"))["agent_servers"]["A"]["command"] == bridge_command()[0]
    back = invoke(["setup", "zed", "--settings", str(path), "--unwrap", "A", "--write"])
    assert back.returncode == 0, back.stderr
    assert path.read_text(encoding="utf-8") == text.replace("\\ud83d\\ude00", "\U0001f600")


def test_names_and_paths_with_controls_are_shown_escaped_in_the_messages_and_the_diff(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("{\n\t\"a\": 1,\n}\n", encoding="utf-8")
    done = invoke(["setup", "zed", "--settings", str(path), "--name", "x\u202ey\x1b[2J", "--", "/nope/a\nb\x9bc"])
    assert done.returncode == 0
    assert done.stderr.decode() == "acp-bridge: setup: /nope/a\\nb\\u009bc does not exist; written as given\n"
    out = done.stdout.decode()
    assert "\x1b" not in out and "\u202e" not in out and "\x9b" not in out
    assert '+\t"agent_servers": {\n+\t\t"x\\u202ey\\u001b[2J": {\n' in out
    assert '"args": ["run", "--", "/nope/a\\nb\\u009bc"],\n' in out
    assert path.read_text(encoding="utf-8") == "{\n\t\"a\": 1,\n}\n"
    refused = invoke(["setup", "zed", "--settings", str(tmp_path / "a\nb\x1b") , "--wrap", "A"])
    assert refused.returncode == 1
    assert refused.stderr.decode() == f"acp-bridge: setup: no agent entry 'A' in {tmp_path}/a\\nb\\u001b\n"


@pytest.mark.parametrize(("text", "line"), [("// only a comment\n", 1), ("// a\n// b", 2), ("{\n  \"a\": 1,\n  ", 3)])
def test_a_file_that_ends_before_its_value_is_refused_at_its_last_line(tmp_path: Path, text: str, line: int) -> None:
    """The library says line 0 at the end of the text: the message said `settings.json:0`."""
    path = tmp_path / "settings.json"
    path.write_text(text, encoding="utf-8")
    done = invoke(["setup", "zed", "--settings", str(path), "--", PYTHON])
    assert done.returncode == 2 and done.stderr.decode().startswith(f"acp-bridge: setup: {path}:{line}: ")
    assert path.read_text(encoding="utf-8") == text


def test_a_second_write_keeps_the_first_backup_and_says_where_the_original_is(zed: Path) -> None:
    """Before, the second --write said nothing of the backup: the user could not tell where
    their own file had gone. The backup is the file before the first --write, never replaced."""
    backup = zed.parent / "settings.json.acp-bridge.bak"
    first = invoke(["setup", "zed", "--settings", str(zed), "--name", "A", "--write", "--", PYTHON, "-m", "a"])
    assert first.stdout.decode().endswith(f"added 'A' in {zed}; the original is kept in {backup}\n")
    second = invoke(["setup", "zed", "--settings", str(zed), "--name", "B", "--write", "--", PYTHON, "-m", "b"])
    assert second.returncode == 0, second.stderr
    assert second.stdout.decode().endswith(
        f"added 'B' in {zed}; the original, from before setup first wrote it, is still kept in {backup}\n")
    assert backup.read_bytes() == ZED
    assert list(json5.loads(zed.read_text(encoding="utf-8"))["agent_servers"])[-2:] == ["A", "B"]
    assert files_in(zed.parent) == ["settings.json", "settings.json.acp-bridge.bak"]


@pytest.mark.parametrize("kind", ["symlink", "folder"])
def test_a_backup_path_that_is_no_regular_file_stops_the_write(zed: Path, kind: str) -> None:
    """The original could not be kept: nothing is written (before, the write went ahead)."""
    backup = zed.parent / "settings.json.acp-bridge.bak"
    elsewhere = zed.parent / "elsewhere"
    elsewhere.write_bytes(b"not the original")
    if kind == "symlink":
        backup.symlink_to(elsewhere)
    else:
        backup.mkdir()
    done = invoke(["setup", "zed", "--settings", str(zed), "--name", "A", "--write", "--", PYTHON])
    assert done.returncode == 2
    assert done.stderr.decode() == (f"acp-bridge: setup: {backup} is there and is not a regular file, so the "
                                    "original cannot be kept in it; nothing written (move it away and run setup "
                                    "again)\n")
    assert zed.read_bytes() == ZED and elsewhere.read_bytes() == b"not the original"


def test_a_file_with_another_hard_link_is_written_and_the_user_told_the_link_keeps_the_old_text(zed: Path) -> None:
    """The new text is renamed over the name given: a second name of the file (a dotfiles
    folder's hard link) keeps the old text. Before, nothing said so."""
    other = zed.parent / "dotfiles-settings.json"
    os.link(zed, other)
    done = invoke(["setup", "zed", "--settings", str(zed), "--name", "A", "--write", "--", PYTHON])
    assert done.returncode == 0
    assert done.stderr.decode() == (f"acp-bridge: setup: {zed} had 2 hard links; only this name holds the new "
                                    "text, the others still hold the old one\n")
    assert other.read_bytes() == ZED and "A" in json5.loads(zed.read_text(encoding="utf-8"))["agent_servers"]
