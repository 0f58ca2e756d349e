"""A command of the package run as its own process, with the peak resident memory of that
process alone (the memory tests of the readers and of `drive`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Ran:
    status: int
    stdout: str
    stderr: str
    peak_mib: float


# Linux keeps the high-water mark of the memory a process had before `exec` in its
# ru_maxrss, and subprocess starts a child with vfork: a child of this (large) test process
# would report at least this process's size. So a small Python starts the command and
# writes its peak, in KiB, to the file named first.
PEAK_OF = ("import os, subprocess, sys\n"
           "child = subprocess.Popen(sys.argv[2:])\n"
           "_, status, usage = os.wait4(child.pid, 0)\n"
           "open(sys.argv[1], 'w').write(str(usage.ru_maxrss))\n"
           "sys.exit(os.waitstatus_to_exitcode(status) % 256)\n")


def run(args: list[str], tmp_path: Path, timeout: float = 20) -> Ran:
    """`python -m acp_bridge ARGS`, with the peak resident memory of that process alone."""
    out, err, peak = tmp_path / "stdout", tmp_path / "stderr", tmp_path / "peak"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-c", PEAK_OF, str(peak), sys.executable, "-m", "acp_bridge", *args],
                                stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, start_new_session=True,
                                env={**os.environ, "OTEL_SDK_DISABLED": "true"})
        try:
            status = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # a hang fails the test instead of the suite
            proc.wait()
            raise AssertionError(f"{args} did not end within {timeout} s") from None
    return Ran(status, out.read_text(), err.read_text(), int(peak.read_text()) / 1024)
