"""What the relay keeps for one direction of traffic, in one record (as h11 keeps
`ConnectionState`): the line being split, the line over the parse limit streaming there,
and where the bridge's own messages may land in it.

Owns: nothing but the record; `Relay` makes one per direction, and `Answers` and `Unparsed`
read and change the same ones. Must never: hold a line whole that the splitter streams.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from acp_bridge.core.forward import Forward
from acp_bridge.core.id_scanner import MemberScanner
from acp_bridge.core.lines import MIB, LineSplitter
from acp_bridge.core.messages import Direction


@dataclass(slots=True)
class DirectionState:
    """One direction's state: its splitter, its long line, and the bridge's messages waiting."""

    splitter: LineSplitter
    # The line over the parse limit streaming in this direction, with the scanner that reads
    # its members (`Unparsed.opaque` keeps it): None between such lines.
    long: MemberScanner | None = None
    # What the bridge writes itself must land between whole lines of its destination: held
    # back while a long line is streaming there, and after a line the source left
    # unterminated at its end (`torn`), preceded by the newline it lacked.
    held: list[Forward] = field(default_factory=list)
    torn: bool = False


def direction_states(max_line: int = 16 * MIB) -> dict[Direction, DirectionState]:
    """A fresh record for each direction, its splitter parsing lines up to `max_line` bytes."""
    return {d: DirectionState(LineSplitter(max_line)) for d in Direction}
