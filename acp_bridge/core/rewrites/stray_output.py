"""Stray agent output (bridge-rules 6.3): an agent stdout line that is no JSON object.

    Starting agent v1.2

With `--stray-output stderr` (`[relay] stray_output = "stderr"`) such a line is not forwarded
(verdict `diverted`, rule `stray-output`); the bridge shows it on its stderr instead:

    acp-bridge: agent stdout (not forwarded): Starting agent v1.2

With the default, `forward`, it goes to the client as it came, and the first one is warned
about in the log.

Owns: which line is stray (`is_stray`), the relay's decision for a line and for the pieces of a
line over the parse limit (decided on its first piece), what the shell says of each on stderr
(`StrayOutput.said`: the diverted line, or the warning about the first one forwarded), and the
declaration of `--stray-output`. Not a rule of the chain: the relay runs it before any rule
sees the line. Must never: change a byte of a line it does not divert, or hold a long line
whole.
"""

from __future__ import annotations

from acp_bridge.core.forward import VERDICT_DIVERTED, VERDICT_OPAQUE, VERDICT_OTHER, Forward
from acp_bridge.core.lines import Opaque
from acp_bridge.core.messages import TO_CLIENT, Frame
from acp_bridge.core.printable import stray_line
from acp_bridge.core.rewrites.options import CHOICE, BuiltIn, Option

NAME = "stray-output"  # the name diverted lines carry as their rule
CHOICES = ("forward", "stderr")  # [relay] stray_output
RULES = (NAME,)  # what a diverted line (or piece of one) names as its rule
# The verdicts of what the shell may have to say something about (`StrayOutput.said`).
VERDICTS = frozenset({VERDICT_OTHER, VERDICT_DIVERTED, VERDICT_OPAQUE})


def is_stray(frame: Frame) -> bool:
    """Is this line, which is no JSON-RPC message the rules read (`Kind.OTHER`), stray
    output: a banner, a log line, a shell's echo, rather than protocol? It is when it is not
    a JSON object: not an object, not a batch (a JSON array of messages), and not starting
    like an object either, so that a message orjson refuses for a detail (NaN, a number
    beyond a double) still goes to the client, which may read it. Blank lines are stray."""
    if frame.msg is not None or frame.batch is not None:
        return False
    return not frame.raw.lstrip().startswith(b"{")


class StrayOutput:
    """Stray output of one connection: diverted when `divert`, else forwarded and warned
    about once. The relay calls `line` and `piece`; the shell calls `said` for each forward
    whose verdict is in `VERDICTS`."""

    __slots__ = ("_long", "_long_shown", "divert", "warned")

    def __init__(self, divert: bool = False) -> None:
        self.divert = divert
        self._long: bool | None = None  # the agent's line over the parse limit: diverted?
        self._long_shown = False  # the diverted line over the parse limit now going by is said
        self.warned = False  # a stray line forwarded to the client was warned about

    def line(self, frame: Frame, out: list[Forward]) -> bool:
        """An agent line the rules cannot read (diverting): taken out of the stream when
        stray (True), else left to the relay (False)."""
        if not is_stray(frame):
            return False
        out.append(Forward(TO_CLIENT, b"", frame.raw, VERDICT_DIVERTED, frame, RULES))
        return True

    def piece(self, piece: Opaque, out: list[Forward]) -> bool:
        """A piece of an agent line over the parse limit (diverting): diverted, as a shorter
        one would be, when the line does not start like a JSON object or batch (decided on
        its first piece; a line that starts with blanks only is forwarded, as it may be
        either)."""
        diverting = self._long
        if diverting is None:  # the line's first piece
            head = piece.data.lstrip()
            diverting = bool(head) and not head.startswith((b"{", b"["))
        self._long = None if piece.end else diverting
        if diverting:
            out.append(Forward(TO_CLIENT, b"", piece.data, VERDICT_OPAQUE, None, RULES))
        return diverting

    def said(self, fwd: Forward) -> tuple[bool, str] | None:
        """What the bridge says on its stderr about `fwd`: (True, the line) for a diverted
        line, or the first piece of a diverted long one; (False, a warning) for the first
        stray line forwarded to the client; None for anything else."""
        verdict = fwd.verdict
        if verdict is VERDICT_DIVERTED:
            return _shown(stray_line(fwd.raw))
        if verdict is VERDICT_OPAQUE:
            if not fwd.rules:  # a piece of a long line forwarded: nothing to say
                return None
            first = not self._long_shown
            self._long_shown = not fwd.raw.endswith(b"\n") and bool(fwd.raw)
            return _shown(stray_line(fwd.raw, long=True)) if first else None
        if verdict is not VERDICT_OTHER or self.warned:
            return None
        if fwd.source is not TO_CLIENT or not fwd.raw.strip():
            return None
        if fwd.frame is not None and fwd.frame.batch is not None:
            return None  # a batch is JSON-RPC, only not a message the rules read
        self.warned = True
        sample = fwd.raw[:80].decode("utf-8", "replace").rstrip()
        return False, (f"the agent wrote a line that is not JSON-RPC to stdout: {sample!r}. It was forwarded as "
                       "it is, but strict clients may fail on it: agents must log to stderr, not stdout "
                       "(further such lines are not reported; -vv and a capture show them)")


def _shown(text: str | None) -> tuple[bool, str] | None:
    return None if text is None else (True, text)


DECLARED = BuiltIn(
    NAME, switch="relay.stray_output", off=("forward",), rank=50,
    options=(Option(
        "stray_output", "relay.stray_output", "--stray-output", "ACP_BRIDGE_STRAY_OUTPUT",
        "An agent stdout line that is not a JSON object (a banner, a shell's echo): forward (default) "
        "passes it to the client as it came; stderr shows it on the bridge's stderr instead.", CHOICE,
        default="forward", choices=CHOICES),),
)
