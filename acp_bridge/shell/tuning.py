"""What the bridge asks of the system for speed.

Owns: telling glibc's malloc to keep the heap it has, and asking for wide pipes. Must never:
fail where the system cannot (each is then a no-op), or cost start-up time for a command
that does not relay.
"""

from __future__ import annotations

import fcntl

from acp_bridge.core.lines import MIB

PIPE_SIZE = MIB
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3  # glibc mallopt parameters


def keep_heap(trim_threshold: int = 64 * MIB, top_pad: int = 16 * MIB, mmap_threshold: int = 4 * MIB) -> None:
    """Stop glibc from handing freed heap back to the kernel after every batch.

    The relay and the capture allocate and free a few megabytes per read; with glibc's
    default 128 KiB trim threshold each batch faults its pages in anew, which measured
    as several microseconds per captured line (bench/), and each 1 MiB read buffer is a
    fresh mmap. Raising the mmap threshold lets read buffers be reused from the heap.
    No-op without glibc.
    """
    import ctypes  # here: only a process that relays or records needs it

    try:
        # By its soname: ctypes.util.find_library would run ldconfig, at a cost to start-up.
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(M_TRIM_THRESHOLD, trim_threshold)
        libc.mallopt(M_TOP_PAD, top_pad)
        libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold)
    except (OSError, AttributeError):
        pass


def widen_pipe(fd: int, size: int = PIPE_SIZE) -> None:
    """Ask for a larger pipe buffer: fewer, larger reads and writes per megabyte relayed.

    Linux only (F_SETPIPE_SZ); anything else, or a refusal, leaves the pipe as it is.
    """
    try:
        fcntl.fcntl(fd, F_SETPIPE_SZ, size)
    except OSError:
        pass
