"""Files the commands write for people: `export --html`, `check --junit`, `replay --rules
--write`.

Owns: the one way such a file is written, whole beside its path and renamed over it (a
failed or interrupted write leaves nothing half written, and a symlink at the path is
replaced, never written through; SIGTERM while it is written ends the process as it
would, exit 128+15, once the partial file is gone), and the refusal of a path that is there but is no
regular file or symlink: a device, a FIFO, a socket or a folder is left as it is (renaming
over `/dev/null` would replace the real one for everyone; opening a FIFO nobody reads would
hang). Commands check their paths with `refuse_special` before they start work, so a bad
path costs nothing. Must never: open the path itself for writing, or follow a symlink there.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from acp_bridge.capture.files import special_kind
from acp_bridge.shell import posix


class NotAFile(Exception):
    """An output path that must be left alone: the message is the line to print."""


def refuse_special(path: str) -> None:
    """Raise NotAFile when `path` names something other than a regular file or a symlink
    (or nothing yet). A path that cannot be looked at is let through: the write says why."""
    if path.endswith("/") or not Path(path).name or Path(path).name in (".", ".."):
        raise NotAFile(f"{path} names a directory, not a file; nothing was written")
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return
    kind = "a directory" if stat.S_ISDIR(mode) else special_kind(mode)
    if kind is not None:
        raise NotAFile(f"{path} is {kind}, not a regular file; it is left as it is")
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise NotAFile(f"{path} is not a regular file; it is left as it is")


@contextmanager
def written_whole(path: str, mode: int = 0o644) -> Iterator[IO[bytes]]:
    """A new file to write `path`'s content into; renamed over `path` when the block ends
    without an exception, removed otherwise (SIGTERM included: `posix.sigterm_unwinds`). Created
    with `mode` (the umask may narrow it).

    Raises:
        NotAFile: `path` is no regular file or symlink (looked at again just before the rename).
        OSError: the new file cannot be made, written or renamed.
    """
    refuse_special(path)
    target = Path(path)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    with posix.sigterm_unwinds():
        try:
            fd = os.open(partial, posix.CREATE_NEW, mode)
            with os.fdopen(fd, "wb") as file:
                yield file
            refuse_special(path)  # made there while we wrote: still not ours to replace
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)

