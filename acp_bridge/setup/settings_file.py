"""An editor's settings file (JSON with comments): found, read, and written back safely.

Owns: where each editor keeps its settings (`settings_path`); reading the file (a regular
file, UTF-8, within a size limit; a symlink followed to its target, which is what gets
edited); the backup beside the file before its first change (`NAME.acp-bridge.bak`, never
overwritten; its path said on each write); and the write: whole beside the file, its mode
kept, synced, renamed over it, refused if the file changed meanwhile (checked under an flock
on its folder).
The in-place edit of its text is `settings_document`'s.
Must never: write without being asked (the command decides), follow a symlink when creating
a file, or replace a file that does not parse.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from acp_bridge.setup.entries import JETBRAINS, ZED

# A settings file is a few KiB (Zed's every default, written out, is under 100 KiB); past this it
# is not one, and json-five would take seconds and hundreds of MB for each 100 KiB of small tokens.
MAX_BYTES = 256 * 1024
BACKUP_SUFFIX = ".acp-bridge.bak"


class SettingsError(Exception):
    """A settings file that cannot be used: the message names the file (and line) and why."""


def settings_path(editor: str, environ: dict[str, str], home: str, platform: str = sys.platform) -> Path:
    """Where `editor` reads its agent entries on this platform: Zed's `settings.json` (in
    `$XDG_CONFIG_HOME/zed`, else `~/.config/zed`, on Linux and macOS alike; `%APPDATA%\\Zed`
    on Windows), JetBrains' `~/.jetbrains/acp.json` (AI Assistant and AIR)."""
    if editor == ZED:
        if platform.startswith("win"):
            return Path(environ.get("APPDATA", os.path.join(home, "AppData", "Roaming")), "Zed", "settings.json")
        base = environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        return Path(base, "zed", "settings.json")
    if editor == JETBRAINS:
        return Path(home, ".jetbrains", "acp.json")
    raise ValueError(f"{editor} keeps no settings file the bridge writes")


@dataclass(frozen=True, slots=True)
class Loaded:
    """A settings file as read: the path given, the file that holds it (a symlink's target),
    its text (None: no file yet), its mode and its number of hard links (the write replaces
    only the name `target`: other links keep the old text)."""

    given: Path
    target: Path
    text: str | None
    mode: int | None
    links: int = 1


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def load(path: Path) -> Loaded:
    """Read the settings file at `path`. Raises SettingsError for something that is not a
    regular file, is too big, is not UTF-8 or cannot be read."""
    target = Path(os.path.realpath(path))  # a dotfiles symlink: the file it points to is edited
    try:
        info = os.stat(target)
    except FileNotFoundError:
        _refuse_a_dangling_link(path)
        return Loaded(path, target, None, None)
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read it: {_reason(exc)}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise SettingsError(f"{path} is not a regular file; it is left as it is")
    if info.st_size > MAX_BYTES:
        raise SettingsError(f"{path} is {info.st_size} bytes, more than a settings file holds; left as it is")
    from acp_bridge.shell.posix import READ_NO_WAIT

    try:  # checked again on what was opened, opened without waiting: a FIFO put there meanwhile
        fd = os.open(target, READ_NO_WAIT)
        with os.fdopen(fd, "rb") as file:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise SettingsError(f"{path} is not a regular file; it is left as it is")
            data = file.read(MAX_BYTES + 1)
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read it: {_reason(exc)}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise SettingsError(f"{path}:{line}: not UTF-8 text; left as it is") from exc
    return Loaded(path, target, text, stat.S_IMODE(info.st_mode), info.st_nlink)


def _refuse_a_dangling_link(path: Path) -> None:
    """A settings path through a symlink to nothing: writing would make the file (and its
    folders) where the link points, which may be anywhere; the user says what they want."""
    for part in [path, *Path(os.path.abspath(path)).parents]:
        if os.path.islink(part) and not os.path.exists(part):
            raise SettingsError(f"{path}: {part} is a symlink to {os.readlink(part)}, which does not exist; "
                                "make that file, or remove the link")


def backup_path(target: Path) -> Path:
    return target.with_name(target.name + BACKUP_SUFFIX)


class ChangedMeanwhile(SettingsError):
    """The file changed between reading it and writing it: another program writes it too."""


@dataclass(frozen=True, slots=True)
class Kept:
    """Where the original of a settings file is kept: `made` by this write, or by an earlier
    one (the first backup is the user's own file, and is never replaced)."""

    path: Path
    made: bool


def write(loaded: Loaded, text: str) -> Kept | None:
    """Write `text` over the settings file: a backup of the original first (only if none is
    there yet), then the new content whole beside it, synced, and renamed over it, with the
    original's mode (a new file: 0600, its folders made). Returns where the original is kept
    (None: there was no file). Raises SettingsError (ChangedMeanwhile when the file is not
    what was read; when the backup's path is taken by something that is no regular file)."""
    target = loaded.target
    made = None
    try:
        if loaded.text is None:
            target.parent.mkdir(parents=True, exist_ok=True)
        from acp_bridge.shell.posix import folder_locked

        # Another setup's check and rename wait for ours (the file itself is replaced, its lock
        # with it; a lock file would be litter in the user's folder): the second one then finds
        # the file changed and writes nothing.
        with folder_locked(target.parent):
            if loaded.text is not None:
                made = _backup(loaded)
            current = load(loaded.given)
            if current.text != loaded.text or current.target != target:
                raise ChangedMeanwhile(f"{loaded.given} changed while setup worked on it (is the editor writing "
                                       "it?); run setup again")
            _replace(target, text.encode("utf-8"), loaded.mode if loaded.mode is not None else 0o600)
    except OSError as exc:
        raise SettingsError(f"{loaded.given}: cannot write it: {_reason(exc)}") from exc
    return made


def _backup(loaded: Loaded) -> Kept:
    """The original beside it as `NAME.acp-bridge.bak`, unless an earlier run made one: the
    first backup is the user's own file, and stays so. A symlink, a folder or a FIFO there
    is not written through: the write stops."""
    path = backup_path(loaded.target)
    assert loaded.text is not None
    from acp_bridge.shell.posix import CREATE_NEW

    try:
        fd = os.open(path, CREATE_NEW, loaded.mode if loaded.mode is not None else 0o600)
    except FileExistsError:
        if stat.S_ISREG(os.lstat(path).st_mode):
            return Kept(path, made=False)
        raise SettingsError(f"{path} is there and is not a regular file, so the original cannot be kept in it; "
                            "nothing written (move it away and run setup again)") from None
    with os.fdopen(fd, "wb") as file:
        file.write(loaded.text.encode("utf-8"))
        os.fsync(file.fileno())
    return Kept(path, made=True)


def _replace(target: Path, data: bytes, mode: int) -> None:
    from acp_bridge.shell.posix import CREATE_NEW

    partial = target.with_name(f".{target.name}.{os.getpid()}.acp-bridge.partial")
    try:
        fd = os.open(partial, CREATE_NEW, mode)
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            os.fsync(file.fileno())
        os.chmod(partial, mode)  # the umask narrowed what os.open was given; the file is ours, just made
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def diff(before: str, after: str, path: str) -> str:
    """A unified diff of the file's text, for the dry run."""
    import difflib

    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 fromfile=path, tofile=path)
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def words(values: Sequence[str]) -> str:
    import shlex

    return " ".join(shlex.quote(value) for value in values)
