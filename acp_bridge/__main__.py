"""`python -m acp_bridge` and the `acp-bridge` command: the command line, imported with the
cyclic garbage collector paused.

Importing it (click and the command group; each command's own modules are imported the same
way when it is asked for) builds thousands of objects that live as long as the process;
collecting while they pile up cost `run` about 3 ms of start-up, and once frozen, no later
collection visits them. Must never: leave the collector off, or import anything else.
"""

from __future__ import annotations

import gc


def main() -> None:
    gc.disable()
    try:
        from acp_bridge.commands import main as command_line
    finally:
        gc.freeze()
        gc.enable()
    command_line()


if __name__ == "__main__":
    main()
