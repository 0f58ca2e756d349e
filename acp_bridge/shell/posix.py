"""Every call of the bridge that only a POSIX system answers, in one place.

Owns: the agent's process group and the signals sent to it (SIGTERM, SIGKILL, those passed
on from the bridge), a process's children (doctor kills the agent of a bridge it
started), the signals the bridge receives, file descriptors as trio streams and
their non-blocking reads and writes, waiting on a descriptor (readable, room to write, the
reader hung up), pipe sizes (fcntl), glibc's malloc options, the flags and mode of a
private new file, and a folder's lock. Must never: decide when to call them (the modules
that import this one do), or fail where the system only declines (a pipe size, malloc
options, a lock: then a no-op).

A port to another system replaces this module: `fd_of` returning None for every stream
turns the shell's descriptor fast paths into plain `send_all` and `receive_some`.
tests/shell/test_posix.py checks that nothing else in the package makes these calls.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import trio
from trio.lowlevel import FdStream

# Passed on to the agent: SDK clients end every session with SIGTERM, a terminal sends
# SIGINT, a closed terminal SIGHUP.
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# For `trio.run_process`: the agent leads a process group of its own, so that stopping
# the agent stops what it started too.
OWN_PROCESS_GROUP: dict[str, Any] = {"process_group": 0}
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3  # glibc mallopt parameters
# A file that must be new: never truncating, never through a symbolic link, not inherited.
CREATE_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# A file to read that must not make the open wait (a FIFO without a writer); check what was opened.
READ_NO_WAIT = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC


# -- signals and the agent's process group -----------------------------------------------

def signal_name(signum: int) -> str:
    """SIGTERM, or "signal 40" for one Python has no name for (real-time signals)."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def terminate_group(proc: trio.Process) -> None:
    """Ask the agent and everything in its group to stop (SIGTERM)."""
    _signal_group(proc, signal.SIGTERM)


def kill_group(proc: trio.Process, *, leftovers: bool = False) -> None:
    """Stop the agent's group at once (SIGKILL). `leftovers`: the agent itself has exited,
    and this is for what it left running (nothing is said if they cannot be reached)."""
    _signal_group(proc, signal.SIGKILL, quiet=leftovers)


def pass_signal(proc: trio.Process, signum: int) -> None:
    """Pass a signal the bridge received on to the agent's group."""
    _signal_group(proc, signum)


def _signal_group(proc: trio.Process, signum: int, *, quiet: bool = False) -> None:
    try:
        os.killpg(proc.pid, signum)
    except ProcessLookupError:
        pass
    except PermissionError:
        if not quiet and proc.returncode is None:
            proc.send_signal(signum)


def forwarded_signals() -> AbstractContextManager[AsyncIterator[int]]:
    """The signals the bridge passes on, as trio receives them (see `FORWARDED_SIGNALS`)."""
    return trio.open_signal_receiver(*FORWARDED_SIGNALS)


async def until_interrupted() -> None:
    """Return at the first SIGINT (Ctrl-C) or SIGTERM: a server's clean end."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            return


@contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """SIGTERM in the block raises SystemExit(128+15), so that `finally` blocks run (a file
    written whole removes its partial file), and whatever the unwinding raises after it (an
    OSError from a write cut short, a command's `fail`), the process still exits 128+15, as
    SIGTERM's own action would have said. Only where SIGTERM has its default action, in the
    main thread (elsewhere it cannot be set): a handler someone set is theirs."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return
    received: list[int] = []

    def stop(signum: int, frame: object) -> None:
        received.append(signum)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    except BaseException:
        if received:
            raise SystemExit(128 + received[0]) from None
        raise
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


# -- file descriptors as streams ---------------------------------------------------------

def open_fd_stream(fd: int) -> FdStream:
    """A stream on a duplicate of `fd` (closing it leaves `fd` open)."""
    return FdStream(os.dup(fd))


def fd_of(stream: object) -> int | None:
    """The descriptor under `stream` when it is a plain one, for the direct reads and writes
    below; None for any other stream."""
    return stream.fileno() if isinstance(stream, FdStream) else None


def read_nowait(fd: int, max_bytes: int) -> bytes | None:
    """What a non-blocking descriptor has, without waiting: None when it has nothing yet,
    b"" at its end. Raises OSError when it is closed under us or broken."""
    try:
        return os.read(fd, max_bytes)
    except BlockingIOError:
        return None


def write_nowait(fd: int, data: bytes) -> int:
    """Write what a non-blocking descriptor takes at once; return how much (0: no room).
    Raises OSError (EPIPE, EBADF) when its reader is gone."""
    try:
        return os.write(fd, data)
    except BlockingIOError:
        return 0


wait_readable = trio.lowlevel.wait_readable  # until `fd` has data (or its end)


def write_if_room(fd: int, data: bytes) -> int:
    """Write `data` now if the descriptor has room for it without waiting; return how much
    was written (0: no room). Only for at most `select.PIPE_BUF` bytes: a pipe that polls
    writable has a free page, so such a write neither waits nor tears. Raises OSError
    (EPIPE, EBADF) when its reader is gone."""
    if len(data) > select.PIPE_BUF or not select.select([], [fd], [], 0)[1]:
        return 0
    try:
        return os.write(fd, data)
    except BlockingIOError:
        return 0


def write_all(fd: int, data: bytes | bytearray) -> None:
    """Write all of `data` to a file descriptor that may be non-blocking (blocking call)."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            # Our stderr can share a terminal's file description with the stdout that
            # FdStream made non-blocking: wait until it drains (callers are in a thread).
            select.select([], [fd], [])


def has_input(fd: int) -> bool:
    """Are there bytes to read in this descriptor right now (or its end)?"""
    poll = select.poll()
    poll.register(fd, select.POLLIN)
    return any(events & (select.POLLIN | select.POLLHUP) for _, events in poll.poll(0))


def hung_up(fd: int) -> bool:
    """Has the writer of this pipe closed its end? A pipe says so (POLLHUP) even while
    unread bytes remain in it."""
    poll = select.poll()
    poll.register(fd, select.POLLHUP)
    return any(events & select.POLLHUP for _, events in poll.poll(0))


# -- what the bridge asks of the system for speed (see shell/tuning.py) -----------------

def set_pipe_size(fd: int, size: int) -> None:
    """Linux only (F_SETPIPE_SZ); anything else, or a refusal, leaves the pipe as it is."""
    try:
        fcntl.fcntl(fd, F_SETPIPE_SZ, size)
    except OSError:
        pass


def set_malloc_options(trim_threshold: int, top_pad: int, mmap_threshold: int) -> None:
    """glibc's mallopt; no-op without glibc."""
    import ctypes  # here: only a process that relays or records needs it

    try:
        # By its soname: ctypes.util.find_library would run ldconfig, at a cost to start-up.
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(M_TRIM_THRESHOLD, trim_threshold)
        libc.mallopt(M_TOP_PAD, top_pad)
        libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold)
    except (OSError, AttributeError):
        pass


# -- processes ----------------------------------------------------------------------------

def process_exists(pid: int) -> bool:
    """Does a process with this id run (one of another user's counts)?"""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OSError, OverflowError):
        return False
    return True


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`: from /proc where there is one (Linux), else from
    `ps -A -o pid= -o ppid=` (POSIX); [] when neither answers."""
    if os.path.isdir("/proc/self"):
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as file:
                    stat = file.read()
            except OSError:  # gone meanwhile
                continue
            fields = stat.rpartition(b")")[2].split()  # after the name, which may hold ") "
            if len(fields) > 1 and fields[1] == str(pid).encode():
                found.append(int(name))
        return found
    import subprocess

    try:
        listed = subprocess.run(["ps", "-A", "-o", "pid=", "-o", "ppid="], capture_output=True, check=False,
                                timeout=5).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return []
    return [int(child) for child, parent in zip(listed[::2], listed[1::2], strict=False) if parent == str(pid).encode()]


def kill_children(pid: int) -> list[int]:
    """SIGKILL to each child of `pid` and to the process group it leads (the bridge's agent
    leads one of its own): for a bridge whose agent ignored SIGTERM, stopped by the process
    that started the bridge (`doctor`). Returns the children found."""
    found = children(pid)
    for child in found:
        try:
            os.killpg(child, signal.SIGKILL)  # only its own group can have its id
        except OSError:
            try:
                os.kill(child, signal.SIGKILL)
            except OSError:
                pass
    return found


# -- private files -----------------------------------------------------------------------

def make_private(fd: int) -> None:
    """Mode 0600 exactly: a umask may have taken bits away."""
    os.fchmod(fd, 0o600)


@contextmanager
def folder_locked(folder: str | os.PathLike[str]) -> Iterator[None]:
    """An exclusive flock on `folder` for the duration (waited for): `setup`'s check that a
    settings file is as read and its rename, one process at a time. Where the file system
    declines (ENOLCK, EINVAL), nothing is locked."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass
        yield
    finally:
        os.close(fd)


# -- standard output ---------------------------------------------------------------------

@contextmanager
def stdout_hidden() -> Iterator[None]:
    """File descriptor 1 pointed at /dev/null for the duration: what a process started
    meanwhile (a browser) writes there goes nowhere, not into our own stdout."""
    sys.stdout.flush()
    saved = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)
