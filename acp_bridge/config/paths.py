"""The paths a configuration names, checked before anything starts: by the file's reader
and by the command-line options that give the same settings (`run --capture`, `drive
--capture`).

Owns: what makes such a path usable: no NUL (a file name cannot hold one, `check_path_chars`),
and a capture path template that `capture.files.capture_path` fills in to a file's name
(known placeholders, a format that fits, not a directory's name, not too long,
`check_capture_template`) with nothing at its path now that refuses a capture (a directory,
a FIFO, a device: `check_capture_target`). Where a relative path in the file leads (its
folder, `~` as a home folder) is the reader's (`config/file.py`). Must never: create,
open or change a file; each check only says what is wrong, through the `fail` it is given.
"""

from __future__ import annotations

import os
import string

from acp_bridge.config.schema import Fail


def check_path_chars(path: str, fail: Fail) -> None:
    """Raise `fail(problem)` when `path` holds a NUL, which no file name can."""
    if "\0" in path:
        raise fail("has a NUL character, which a file name cannot hold")


def check_capture_template(template: str, fail: Fail) -> None:
    """Raise `fail(problem)` unless `capture_path` can fill in `template` at run time, into
    a name a file can have (not empty, not a directory's)."""
    from acp_bridge.capture.files import CAPTURE_FIELDS, capture_path  # only with a capture

    if not template:
        raise fail("is empty; name a capture file")
    if os.path.basename(template) in ("", ".", ".."):
        raise fail(f"{template} names a directory, not a file")
    check_path_chars(template, fail)
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:
        raise fail(f"bad template {template!r}: {exc}") from None
    unknown = names - CAPTURE_FIELDS
    if unknown:
        raise fail(f"unknown placeholder {{{sorted(unknown)[0]}}} (known: {{time}}, {{pid}})")
    try:  # a format spec or conversion that does not fit the value: {pid:s}, {time:d}
        filled = capture_path(template, 0.0, pid=4194304)
    except (ValueError, TypeError) as exc:
        raise fail(f"bad template {template!r}: {exc}") from None
    if len(filled) > 4096:
        raise fail(f"bad template {template!r}: the file name would be {len(filled)} characters long")


def check_capture_target(template: str, fail: Fail) -> None:
    """Raise `fail(problem)` when what is at `template`'s path now (filled in with this time
    and process id) refuses a capture: a directory, a FIFO, a device, a folder above it that is
    a file (`capture_target_problem`). Checked with the template, before the agent starts."""
    import time

    from acp_bridge.capture.files import capture_path, capture_target_problem

    problem = capture_target_problem(capture_path(template, time.time(), os.getpid()))
    if problem is not None:
        raise fail(problem)
