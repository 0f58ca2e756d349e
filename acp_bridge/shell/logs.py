"""The bridge's own log: where it goes (stderr, or `--log-file`) and at what level.

Owns: the one handler of the `acp_bridge` logger and writing a log line to file descriptor
2 whole. Must never: write to stdout (the protocol channel).
"""

from __future__ import annotations

import logging

from acp_bridge.config import Config


class StderrHandler(logging.Handler):
    """Log lines straight to file descriptor 2.

    When stdout and stderr are one terminal, the FdStream on stdout makes the shared file
    description non-blocking, and a plain StreamHandler would then fail with
    BlockingIOError on a busy terminal; this waits for room instead.
    """

    def __init__(self, fd: int = 2) -> None:
        super().__init__()
        self.fd = fd

    def emit(self, record: logging.LogRecord) -> None:
        from acp_bridge.shell.agent import write_all

        try:
            write_all(self.fd, (self.format(record) + "\n").encode("utf-8", "replace"))
        except Exception:
            self.handleError(record)


def setup_logging(config: Config) -> None:
    level = {-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO}.get(config.verbosity, logging.DEBUG)
    handler: logging.Handler
    if config.log_file:
        handler = logging.FileHandler(config.log_file, encoding="utf-8")
    else:
        handler = StderrHandler()
    handler.setFormatter(logging.Formatter("acp-bridge: %(levelname)s: %(message)s"))
    root = logging.getLogger("acp_bridge")
    for old in root.handlers:
        old.close()
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
