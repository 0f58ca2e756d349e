"""What the bridge asks of the system for speed.

Owns: how rarely the garbage collector runs, telling glibc's malloc to keep the heap it
has, and asking for wide pipes (the calls themselves are in shell/posix.py). Must never:
fail where the system cannot (each is then a no-op), or cost start-up time for a command
that does not relay.
"""

from __future__ import annotations

import gc

from acp_bridge.core.lines import MIB
from acp_bridge.shell import posix

PIPE_SIZE = MIB


def collect_rarely() -> None:
    """Collect young garbage less often.

    The relay allocates a few objects per parsed line, and they live until the chunk that
    carried them has been written (a 1 MiB read can hold 10,000 lines). With the default
    threshold (700) the collector, not the relay, is the main cost under load; at 50,000 it
    still traversed each chunk's objects before they died (8% of the relay's time toward the
    agent). Little cyclic garbage is made, so collecting it rarely holds little memory.
    """
    gc.set_threshold(500_000, 10, 10)


def keep_heap(trim_threshold: int = 64 * MIB, top_pad: int = 16 * MIB, mmap_threshold: int = 4 * MIB) -> None:
    """Stop glibc from handing freed heap back to the kernel after every batch.

    The relay and the capture allocate and free a few megabytes per read; with glibc's
    default 128 KiB trim threshold each batch faults its pages in anew, which measured
    as several microseconds per captured line (bench/), and each 1 MiB read buffer is a
    fresh mmap. Raising the mmap threshold lets read buffers be reused from the heap.
    No-op without glibc.
    """
    posix.set_malloc_options(trim_threshold, top_pad, mmap_threshold)


def widen_pipe(fd: int, size: int = PIPE_SIZE) -> None:
    """Ask for a larger pipe buffer: fewer, larger reads and writes per megabyte relayed.

    Linux only; anything else, or a refusal, leaves the pipe as it is.
    """
    posix.set_pipe_size(fd, size)
