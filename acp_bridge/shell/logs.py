"""The bridge's own log: where it goes (stderr, or `--log-file`) and at what level.

Owns: the one handler of the `acp_bridge` logger, writing a log line to file descriptor
2 whole, and escaping what a log line quotes from the wire (`PrintableFormatter`). Must
never: write to stdout (the protocol channel), or touch the agent's stderr, which the
bridge copies as it comes, not through logging.
"""

from __future__ import annotations

import logging
from typing import Any

from acp_bridge.config import Config
from acp_bridge.core.printable import printable, printable_lines

FORMAT = "acp-bridge: %(levelname)s: %(message)s"


class PrintableFormatter(logging.Formatter):
    """Log lines with no control character in them: a session id or method the agent
    chose (`"x\\u001b]0;PWNED\\u0007y"`) cannot retitle or rewrite the terminal, nor a
    line feed in it forge a second log line. Escaped here, at the one handler, so that no
    call site can forget it; backslashes are left as they are, since messages quote ids
    as `repr()`s, which are escaped already. A traceback keeps its line feeds."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return printable(super().formatMessage(record), quote_backslash=False)

    def formatException(self, ei: Any) -> str:
        return printable_lines(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return printable_lines(super().formatStack(stack_info))


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
        from acp_bridge.shell.posix import write_all

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
    handler.setFormatter(PrintableFormatter(FORMAT))
    root = logging.getLogger("acp_bridge")
    for old in root.handlers:
        old.close()
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
