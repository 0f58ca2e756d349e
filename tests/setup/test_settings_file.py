"""An editor's settings edited in place: on copies of realistic files (Zed's own form with
comments and trailing commas, a user's file with tabs, JetBrains' acp.json), each result
parsed again with the same library, and the untouched text compared byte for byte."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import json5
import pytest

from acp_bridge.setup import settings_document as sd
from acp_bridge.setup import settings_file as sf

FILES = Path(__file__).parent / "files"
ZED = (FILES / "zed_default.json").read_text(encoding="utf-8")
USER = (FILES / "user_settings.json").read_text(encoding="utf-8")
JETBRAINS = (FILES / "jetbrains_acp.json").read_text(encoding="utf-8")
ENTRY = {"type": "custom", "command": "/b/acp-bridge", "args": ["run", "--", "/n/agent"], "env": {}}


def assert_one_insertion(before: str, after: str, inserted: str) -> None:
    """`after` is `before` with `inserted` put in one place: everything else byte for byte."""
    assert after.count(inserted) == 1
    assert after.replace(inserted, "", 1) == before


def test_an_entry_added_to_zeds_own_file_is_one_insertion_in_its_style() -> None:
    doc = sd.Document(ZED, "settings.json")
    doc.set_entry("agent (acp-bridge)", ENTRY)
    after = doc.text()
    assert_one_insertion(ZED, after, (
        '\n    "agent (acp-bridge)": {\n'
        '      "type": "custom",\n'
        '      "command": "/b/acp-bridge",\n'
        '      "args": ["run", "--", "/n/agent"],\n'
        '      "env": {}\n'
        '    },'))
    assert json5.loads(after)["agent_servers"]["agent (acp-bridge)"] == ENTRY
    assert json5.loads(after)["agent_servers"]["My agent"]["env"] == {"MY_AGENT_KEY": "k-123"}


def test_keys_changed_in_place_keep_the_comment_on_the_entrys_line() -> None:
    doc = sd.Document(ZED, "settings.json")
    doc.set_key("My agent", "command", "/b/acp-bridge")
    doc.set_key("My agent", "args", ["run", "--", "my-agent", "--acp"])
    assert doc.text() == ZED.replace('"command": "my-agent",', '"command": "/b/acp-bridge",').replace(
        '"args": ["--acp"],', '"args": ["run", "--", "my-agent", "--acp"],')


def test_a_file_without_agent_servers_gets_it_at_the_end_with_its_tabs_and_comments_kept() -> None:
    doc = sd.Document(USER, "settings.json")
    doc.set_entry("a", {"command": "/b/acp-bridge"})
    after = doc.text()
    assert_one_insertion(USER, after, '\n\t"agent_servers": {\n\t\t"a": {\n\t\t\t"command": "/b/acp-bridge"\n\t\t}\n\t},')
    assert json5.loads(after)["agent_servers"] == {"a": {"command": "/b/acp-bridge"}}


def test_a_jetbrains_file_without_trailing_commas_gets_a_comma_and_the_entry() -> None:
    doc = sd.Document(JETBRAINS, "acp.json")
    doc.set_entry("b", {"command": "/b/acp-bridge", "args": [], "env": {}})
    after = doc.text()
    assert after == JETBRAINS.replace(
        '      "use_idea_mcp": false\n    }\n',
        '      "use_idea_mcp": false\n    },\n    "b": {\n      "command": "/b/acp-bridge",\n'
        '      "args": [],\n      "env": {}\n    }\n')
    assert list(json5.loads(after)["agent_servers"]) == ["Example Agent", "b"]


def test_a_comment_after_the_last_member_stays_on_its_line_after_the_new_comma() -> None:
    text = '{\n  "a": 1 // one\n}\n'
    doc = sd.Document(text, "s")
    doc.set_entry("x", {})
    assert doc.text() == '{\n  "a": 1, // one\n  "agent_servers": {\n    "x": {}\n  }\n}\n'


@pytest.mark.parametrize("text", ["", "\n", "{}", "{\n}\n", "// nothing yet\n{\n}\n"])
def test_an_empty_file_or_object_gets_the_entry(text: str) -> None:
    doc = sd.Document(text, "s")
    doc.set_entry("x", {"command": "c"})
    assert json5.loads(doc.text()) == {"agent_servers": {"x": {"command": "c"}}}


def test_a_removed_key_leaves_valid_text() -> None:
    doc = sd.Document('{"agent_servers": {"x": {"command": "c", "args": []}}}', "s")
    doc.remove_key("x", "args")
    assert json5.loads(doc.text()) == {"agent_servers": {"x": {"command": "c"}}}


@pytest.mark.parametrize(("text", "message"), [
    pytest.param('{\n  "a": 1,\n  "b" 2\n}\n', "s:3: Syntax Error. Was expecting COLON in or near token INTEGER",
                 id="missing-colon"),
    pytest.param('{\n  "a": [1, 2\n}\n', "s:3:", id="unclosed-list"),
    pytest.param("[1, 2]", "s: the file holds no JSON object at its top", id="not-an-object"),
    pytest.param('{"agent_servers": []}', "s: agent_servers is not an object", id="servers-not-an-object"),
    pytest.param("[" * 1000 + "]" * 1000, "s", id="nested-1000-deep"),
])
def test_a_file_that_does_not_parse_is_refused_with_its_line(text: str, message: str) -> None:
    def edit() -> None:
        sd.Document(text, "s").set_entry("x", {})

    with pytest.raises(sf.SettingsError) as caught:
        edit()
    assert str(caught.value).startswith(message)
    assert str(caught.value).endswith("left as it is")


def test_settings_path_follows_the_platform() -> None:
    assert sf.settings_path("zed", {}, "/home/me", "linux") == Path("/home/me/.config/zed/settings.json")
    assert sf.settings_path("zed", {"XDG_CONFIG_HOME": "/x"}, "/home/me", "linux") == Path("/x/zed/settings.json")
    assert sf.settings_path("zed", {}, "/Users/me", "darwin") == Path("/Users/me/.config/zed/settings.json")
    assert sf.settings_path("jetbrains", {}, "/home/me", "linux") == Path("/home/me/.jetbrains/acp.json")


def test_write_backs_up_once_keeps_the_mode_and_edits_a_symlinks_target(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "settings.json"
    real.parent.mkdir()
    real.write_text(ZED, encoding="utf-8")
    real.chmod(0o640)
    link = tmp_path / "config" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(real)
    loaded = sf.load(link)
    assert loaded.target == real
    kept = sf.write(loaded, ZED + "\n")
    backup = real.with_name("settings.json.acp-bridge.bak")
    assert kept == sf.Kept(backup, made=True)
    assert backup.read_text(encoding="utf-8") == ZED
    assert link.is_symlink() and real.read_text(encoding="utf-8") == ZED + "\n"
    assert stat.S_IMODE(os.stat(real).st_mode) == 0o640
    assert stat.S_IMODE(os.stat(backup).st_mode) == 0o640
    # the first backup stays the user's own file, and the second write says so
    assert sf.write(sf.load(link), ZED + "\n\n") == sf.Kept(backup, made=False)
    assert backup.read_text(encoding="utf-8") == ZED
    assert sorted(p.name for p in real.parent.iterdir()) == ["settings.json", "settings.json.acp-bridge.bak"]


def test_write_refuses_a_file_changed_since_it_was_read(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("{}", encoding="utf-8")
    loaded = sf.load(path)
    path.write_text('{"theme": "x"}', encoding="utf-8")  # the editor saved meanwhile
    with pytest.raises(sf.ChangedMeanwhile):
        sf.write(loaded, '{"agent_servers": {}}')
    assert path.read_text(encoding="utf-8") == '{"theme": "x"}'


def test_a_new_file_is_made_private_with_its_folders(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "acp.json"
    assert sf.write(sf.load(path), "{}\n") is None
    assert path.read_text(encoding="utf-8") == "{}\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_what_is_not_a_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "settings.json"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    with pytest.raises(sf.SettingsError, match="is not a regular file"):
        sf.load(path)


def test_a_file_that_is_not_utf8_is_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_bytes(b'{\n"a": "\xff"\n}')
    with pytest.raises(sf.SettingsError, match=r"settings.json:2: not UTF-8"):
        sf.load(path)


def test_a_file_too_big_for_settings_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    with open(path, "wb") as file:
        file.truncate(sf.MAX_BYTES + 1)  # sparse: nothing of it is written or read
    with pytest.raises(sf.SettingsError, match=r"is 262145 bytes, more than a settings file holds"):
        sf.load(path)


def test_a_hundred_digit_number_and_unicode_escapes_elsewhere_in_the_file_stay_as_written() -> None:
    text = '{\n  "big": 1234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890,\n  "e": "\\u00e9",\n}\n'
    doc = sd.Document(text, "s")
    doc.set_entry("x", {"command": "c"})
    assert doc.text().startswith(text.split(",\n}", 1)[0] + ",")
    assert '"e": "\\u00e9",' in doc.text()


def test_a_file_bigger_than_any_settings_file_is_refused_unread(tmp_path: Path) -> None:
    """json-five takes seconds and hundreds of MB for each few hundred KiB of small tokens."""
    path = tmp_path / "settings.json"
    with open(path, "wb") as file:
        file.truncate(1024 * 1024)
    with pytest.raises(sf.SettingsError, match=r"is 1048576 bytes, more than a settings file holds"):
        sf.load(path)


def test_the_check_and_the_rename_are_made_under_a_lock_on_the_folder(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Two `setup --write` at once: without the lock, both could pass the check before either
    renamed, and the second rename would lose the first one's entry."""
    import fcntl

    path = tmp_path / "settings.json"
    path.write_text("{}", encoding="utf-8")
    held = []
    replace = sf._replace

    def probing(target: Path, data: bytes, mode: int) -> None:
        fd = os.open(tmp_path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.append(False)
        except BlockingIOError:
            held.append(True)
        finally:
            os.close(fd)
        replace(target, data, mode)

    monkeypatch.setattr(sf, "_replace", probing)
    sf.write(sf.load(path), '{"a": 1}')
    sf.write(sf.load(tmp_path / "new.json"), "{}")
    assert held == [True, True]
    assert path.read_text(encoding="utf-8") == '{"a": 1}'


@pytest.mark.parametrize("dangling", ["zed/settings.json", "zed"])
def test_a_symlink_to_nothing_is_refused_not_followed_to_create_a_file(tmp_path: Path, dangling: str) -> None:
    (tmp_path / "zed").mkdir(exist_ok=dangling != "zed")
    if dangling == "zed":
        (tmp_path / "zed").rmdir()
    (tmp_path / dangling).symlink_to(tmp_path / "gone")
    with pytest.raises(sf.SettingsError, match=rf"^{tmp_path}/zed/settings.json: {tmp_path}/{dangling} is a symlink "
                                               rf"to {tmp_path}/gone, which does not exist; "
                                               "make that file, or remove the link$"):
        sf.load(tmp_path / "zed" / "settings.json")
    assert not (tmp_path / "gone").exists()


@pytest.mark.parametrize("args", [
    '["--acp" /* in args */, "-v"]',
    '[/* first */ "--acp", /* second */ "-v", // why\n      ]',
    '[\n        "--acp", // the ACP mode\n        "-v"\n      ]',
])
def test_comments_inside_args_stay_through_wrap_and_unwrap(args: str) -> None:
    text = '{\n  "agent_servers": {\n    "A": {\n      "command": "a",\n      "args": ' + args + ',\n    },\n  },\n}\n'
    doc = sd.Document(text, "s")
    wrapped = ["run", "--", "a", "--acp", "-v"]
    doc.set_key("A", "command", "/b/acp-bridge")
    doc.set_key("A", "args", wrapped)
    assert json5.loads(doc.text())["agent_servers"]["A"]["args"] == wrapped
    for comment in ("/* in args */", "/* first */", "/* second */", "// why", "// the ACP mode"):
        assert doc.text().count(comment) == text.count(comment)
    again = sd.Document(doc.text(), "s")
    again.set_key("A", "command", "a")
    again.set_key("A", "args", ["--acp", "-v"])
    assert again.text() == text


def test_a_fifo_put_in_place_of_the_file_after_its_check_is_refused_without_waiting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The type is checked on the file opened, which is opened without waiting: a FIFO that
    replaced the file between the check of its name and the open (simulated by a stat that
    says regular) is refused at once. Before, the open waited for a writer, for ever."""
    import threading

    path = tmp_path / "settings.json"
    os.mkfifo(path)
    regular, real_stat = os.stat(FILES / "zed_default.json"), os.stat
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: regular if str(p) == str(path) else real_stat(p, *a, **k))
    result: list[object] = []

    def load() -> None:
        try:
            result.append(sf.load(path))
        except sf.SettingsError as exc:
            result.append(str(exc))

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(10)
    if thread.is_alive():  # let the open return: a writer comes and goes
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        thread.join()
    assert result == [f"{path} is not a regular file; it is left as it is"]


@pytest.mark.skipif(os.geteuid() != 0, reason="forks a child that becomes nobody, which only root may")
def test_a_file_the_user_cannot_read_is_refused_with_why(tmp_path: Path) -> None:
    """Run as root, no file is unreadable to us: a forked child becomes nobody, which cannot
    read it (nor enter the folders pytest made for root)."""
    path = tmp_path / "settings.json"
    path.write_text("{}", encoding="utf-8")
    path.chmod(0o600)
    tmp_path.chmod(0o755)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: nobody, which may enter the folder but not read the file
        try:
            os.setgid(65534)
            os.setuid(65534)
            sf.load(path)
            os.write(write_end, b"read")
        except sf.SettingsError as exc:
            os.write(write_end, str(exc).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as said:
        message = said.read().decode()
    os.waitpid(pid, 0)
    assert message == f"{path}: cannot read it: Permission denied"


@pytest.mark.parametrize("text", [
    '{\r\n  "a": 1,\r\n  "agent_servers": {\r\n    "x": {"command": "c"}\r\n  }\r\n}\r\n',
    '{\r\n  "a": 1 // one\r\n}\r\n',
])
def test_a_file_with_crlf_line_ends_gets_them_in_what_is_inserted(text: str) -> None:
    """A Windows user's file: before, the entry came with LF line ends among the CRLF ones."""
    doc, lf = sd.Document(text, "s"), sd.Document(text.replace("\r\n", "\n"), "s")
    for each in (doc, lf):
        each.set_entry("new", {"command": "n"})
    assert doc.text() == lf.text().replace("\n", "\r\n")  # the same edit, every line end CRLF
    assert json5.loads(doc.text())["agent_servers"]["new"] == {"command": "n"}


def test_a_file_of_mixed_line_ends_keeps_them_as_they_are() -> None:
    text = '{\r\n  "a": 1,\n  "b": 2\r\n}\n'
    doc = sd.Document(text, "s")
    doc.set_entry("new", {"command": "n"})
    assert doc.text().startswith('{\r\n  "a": 1,\n  "b": 2,')
