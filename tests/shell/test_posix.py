"""Every POSIX-only call of the package is in shell/posix.py, so that a port to another
system is one module's work (issue 24).

The scan reads each module's syntax tree for the calls that only a POSIX system answers:
the modules that are POSIX-only or mostly so (signal, fcntl, select's poll and select on
pipes, termios, ...), POSIX-only names of `os` (process groups, blocking modes, file
modes and flags), trio's descriptor streams and waits, and the keyword arguments of
`subprocess`/`trio.run_process` that start a process in its own session or group.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import acp_bridge

PACKAGE = Path(acp_bridge.__file__).parent
POSIX_MODULES = frozenset({"fcntl", "select", "signal", "termios", "tty", "pty", "resource", "pwd", "grp",
                           "ctypes"})
POSIX_OS_NAMES = frozenset({
    "killpg", "setsid", "setpgid", "getpgid", "getpgrp", "setpgrp", "getsid", "kill", "fork", "forkpty",
    "wait", "waitpid", "wait3", "wait4", "WNOHANG", "set_blocking", "get_blocking", "pipe2", "mkfifo",
    "fchmod", "fchown", "chown", "getuid", "geteuid", "getgid", "getegid",
    "O_NOFOLLOW", "O_NONBLOCK", "O_CLOEXEC", "O_NOCTTY", "O_DIRECTORY", "O_NDELAY",
})
POSIX_TRIO_NAMES = frozenset({"FdStream", "wait_readable", "wait_writable", "open_signal_receiver"})
POSIX_KEYWORDS = frozenset({"start_new_session", "process_group", "preexec_fn", "pass_fds", "restore_signals"})
HOME = "acp_bridge.shell.posix"
# Outside the shell, where shell/posix.py cannot be imported (core, replay: below the shell)
# or has not been routed to yet (commands): exactly these, so that a new one fails here.
ELSEWHERE = {
    "acp_bridge.core.scan": {"import ctypes"},  # glibc's memmem, with a pure fallback elsewhere
    "acp_bridge.replay.report": {"import select"},  # waits for room on a non-blocking stderr
    # opening a capture without blocking on a FIFO (the one reader; below the shell)
    # and walking down to it without following a link at any step (the servers' catalog)
    "acp_bridge.capture.files": {"os.O_CLOEXEC", "os.O_NONBLOCK", "os.O_NOFOLLOW", "os.set_blocking",
                                 "os.O_DIRECTORY"},
}


def posix_calls(source: str) -> set[str]:
    """The POSIX-only calls `source` makes, named as written (`import signal`, `os.killpg`,
    `FdStream`, `start_new_session=`)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {f"import {a.name}" for a in node.names if a.name.split(".")[0] in POSIX_MODULES}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            top = node.module.split(".")[0]
            if top in POSIX_MODULES:
                found.add(f"import {top}")
            elif top == "os":
                found |= {f"os.{a.name}" for a in node.names if a.name in POSIX_OS_NAMES}
            elif top == "trio":
                found |= {a.name for a in node.names if a.name in POSIX_TRIO_NAMES}
        elif isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "os" and node.attr in POSIX_OS_NAMES:
                found.add(f"os.{node.attr}")
            elif node.attr in POSIX_TRIO_NAMES and not (isinstance(node.value, ast.Name) and node.value.id == "posix"):
                found.add(node.attr)  # trio's, not shell/posix.py's own by that name
        elif isinstance(node, ast.keyword) and node.arg in POSIX_KEYWORDS:
            found.add(f"{node.arg}=")
    return found


def calls_in(package: Path) -> dict[str, set[str]]:
    """The POSIX-only calls of every module of the package at `package` that makes any."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = [package.name, *path.relative_to(package).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        if calls := posix_calls(path.read_text(encoding="utf-8")):
            found[".".join(parts)] = calls
    return found


def test_only_shell_posix_makes_posix_only_calls() -> None:
    found = calls_in(PACKAGE)
    assert HOME in found  # the scan sees the calls where they are
    del found[HOME]
    assert found == ELSEWHERE


def test_shell_posix_holds_what_the_shell_needs() -> None:
    assert calls_in(PACKAGE)[HOME] >= {
        "import fcntl", "import select", "import signal", "import ctypes", "os.killpg", "FdStream",
        "wait_readable", "open_signal_receiver", "os.O_NOFOLLOW", "os.O_CLOEXEC", "os.fchmod"}


@pytest.mark.parametrize(("source", "expected"), [
    ("import signal\nsignal.SIGKILL", {"import signal"}),
    ("from signal import SIGKILL", {"import signal"}),
    ("import fcntl", {"import fcntl"}),
    ("import os\nos.killpg(1, 9)", {"os.killpg"}),
    ("from os import setsid\nsetsid()", {"os.setsid"}),
    ("os.set_blocking(0, False)", {"os.set_blocking"}),
    ("os.getpgid(0)", {"os.getpgid"}),
    ("fd = os.open(p, os.O_WRONLY | os.O_NOFOLLOW)", {"os.O_NOFOLLOW"}),
    ("trio.lowlevel.FdStream(0)", {"FdStream"}),
    ("from trio.lowlevel import FdStream", {"FdStream"}),
    ("from trio import lowlevel\nlowlevel.FdStream(0)", {"FdStream"}),
    ("await trio.lowlevel.wait_readable(fd)", {"wait_readable"}),
    ("with trio.open_signal_receiver(2) as s: pass", {"open_signal_receiver"}),
    ("subprocess.Popen(['x'], start_new_session=True)", {"start_new_session="}),
    ("trio.run_process(['x'], process_group=0)", {"process_group="}),
    ("def f():\n    import select\n    return select.poll()", {"import select"}),
    # portable: none of these is reported
    ("os.write(fd, b'x'); os.read(fd, 1); os.open(p, os.O_WRONLY | os.O_EXCL); os.getpid()", set()),
    ("trio.run_process(['x'], cwd='/', env={})", set()),
    ("from acp_bridge.shell import posix\nawait posix.wait_readable(fd)", set()),
])
def test_the_scan_finds_each_kind_of_call(source: str, expected: set[str]) -> None:
    assert posix_calls(source) == expected


def test_a_planted_call_outside_shell_posix_is_found(tmp_path: Path) -> None:
    package = tmp_path / "acp_bridge"
    (package / "shell").mkdir(parents=True)
    (package / "shell" / "posix.py").write_text("import os\nos.killpg(1, 15)\n")
    (package / "shell" / "bridge.py").write_text("import os\n\ndef stop(pid):\n    os.killpg(pid, 9)\n")
    (package / "shell" / "streams.py").write_text("from trio.lowlevel import FdStream\n")
    (package / "shell" / "tuning.py").write_text("import os\nos.write(1, b'portable')\n")
    assert calls_in(package) == {"acp_bridge.shell.posix": {"os.killpg"}, "acp_bridge.shell.bridge": {"os.killpg"},
                                 "acp_bridge.shell.streams": {"FdStream"}}


def test_what_a_child_writes_while_stdout_is_hidden_goes_nowhere() -> None:
    """`ui --open` starts a browser, whose chatter must not follow the address on stdout."""
    code = ("import os, sys\nfrom acp_bridge.shell.posix import stdout_hidden\nprint('url', flush=True)\n"
            "with stdout_hidden():\n    os.system('echo chatter')\nprint('after')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, timeout=30)
    assert done.stdout == b"url\nafter\n"


@pytest.mark.parametrize("proc_fs", [True, False], ids=["proc", "ps"])
def test_children_are_found_in_proc_and_by_ps(proc_fs: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from acp_bridge.shell import posix

    if not proc_fs:
        if shutil.which("ps") is None:
            pytest.skip("no ps on this system")
        monkeypatch.setattr(os.path, "isdir", lambda path: False)
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert child.pid in posix.children(os.getpid())
        assert posix.children(child.pid) == []
    finally:
        child.kill()
        child.wait()
    assert child.pid not in posix.children(os.getpid())
