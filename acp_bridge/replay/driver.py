"""`acp-bridge drive`: the client side of a capture played to a live agent, over a stream.

Owns: `Driver`, which sends the recorded client's lines (replay/client_side.py) in order:
each request once the one before it is answered, each prompt once the turn before it has
ended (v1: its response; v2: the idle `state_update`) and the agent has written what it
had written by then in the recording (or gone quiet), a notification of a turn (a cancel)
once the agent has sent as many messages in the turn as it had in the recording; answers
the agent's requests from the recording (an error saying so when it has none); and says,
per turn, what went wrong (a timeout, the agent gone, a request it could not answer).
Must never: start or stop a process (the caller owns the agent: `stopped` asks it to stop
it), or compare what the agent did with the recording (replay/compare.py does).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import trio

from acp_bridge.core import protocol as p
from acp_bridge.core import shapes as read
from acp_bridge.core.messages import Direction, Frame, Unencodable, classify, encode, id_key
from acp_bridge.core.protocol import Json
from acp_bridge.replay.client_side import ClientSide, Outgoing, Rewriter
from acp_bridge.replay.drive_report import DriveReport, TurnReport

READ_SIZE = 1 << 20
MAX_LINE = 16 << 20  # a longer line from the agent is counted, not read (the bridge's default parse limit)
FLOOD_FLOOR = 10_000  # lines the agent may write beyond ten times what the whole recording holds
SETTLE_QUIET = 0.3  # seconds of silence after which the agent is taken to have said all it will before the next line


class AgentGone(Exception):
    """The agent's output ended."""


class Driver:
    """Plays `side` over `stream` (the agent, or a bridge in front of it)."""

    def __init__(self, side: ClientSide, stream: trio.abc.HalfCloseableStream, *, cwd: str | None = None,
                 timeout: float | None = None, say: Callable[[str], None] = lambda text: None) -> None:
        self.side = side
        self.stream = stream
        self.timeout = timeout
        self.say = say
        self.rewriter = Rewriter(cwd, side.cwds)
        self.report = DriveReport()
        # every line the agent writes is recorded, then read back to be compared: without a
        # bound, an agent writing in a loop fills the disk and the memory (1 GB per 5 s)
        self.max_lines = 10 * sum(track.messages() for track in side.tracks) + FLOOD_FLOOR
        self._lines = 0
        self._send_lock = trio.StrictFIFOLock()
        self._waiting: dict[Any, tuple[trio.Event, list[Json]]] = {}  # id key -> answered, the answer
        self._said: set[str] = set()
        self._version = 1
        self._current: TurnReport | None = None
        self._turn_session: Any = None  # the live session of the prompt in flight (v2: its idle ends the turn)
        self._turn_ended = trio.Event()
        self._seen = 0  # the agent's messages since the prompt was sent
        self._progress = trio.Event()  # set on each message from the agent
        self._gone = trio.Event()

    async def run(self) -> DriveReport:
        for text in self.side.withheld:
            self.say(f"the capture withheld {text} whole (redaction): it is not sent")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._read)
            try:
                await self._play()
            except AgentGone:
                pass
            nursery.cancel_scope.cancel()
        return self.report

    async def _play(self) -> None:
        lines = self.side.lines
        index = 0
        while index < len(lines):
            line = lines[index]
            index += 1
            report = self.report.turn(line)
            self._current = report
            await self._settle(line.before)
            if line.kind != "request":
                await self._send_line(line)
                continue
            later: list[Outgoing] = []  # the notifications of this turn, sent while it runs
            while line.is_prompt and index < len(lines) and lines[index].kind == "notification" \
                    and (lines[index].track, lines[index].turn) == (line.track, line.turn):
                later.append(lines[index])
                index += 1
            if not await self._request(line, report, later):
                self._abandon(lines[index:])
                return

    async def _request(self, line: Outgoing, report: TurnReport, later: list[Outgoing]) -> bool:
        """Send a request, wait for its answer (a prompt: for its turn's end); False when the
        run cannot go on (the agent is gone, or stopped after a timeout)."""
        answered = trio.Event()
        answer: list[Json] = []
        request_id = line.msg.get("id") if isinstance(line.msg, dict) else None
        self._waiting[id_key(request_id)] = (answered, answer)
        try:
            return await self._answered(line, report, later, answered, answer)
        finally:
            del self._waiting[id_key(request_id)]

    async def _answered(self, line: Outgoing, report: TurnReport, later: list[Outgoing], answered: trio.Event,
                        answer: list[Json]) -> bool:
        if line.is_prompt:
            self._turn_ended = trio.Event()
            recorded = read.session_id_of(line.msg)
            self._turn_session = self.rewriter.sessions.get(recorded, recorded) if isinstance(recorded, str) \
                else recorded
            self._seen = 0
        with trio.move_on_after(self.timeout if self.timeout is not None else float("inf")) as scope:
            try:
                await self._send_line(line)
                await self._wait(answered, line, later)
            except AgentGone:
                if self.report.stopped is None:  # else the reader said why it stopped it
                    report.problems.append(f"the agent's output ended before {self._waiting_for(line)}")
                return False
        if scope.cancelled_caught:
            report.problems.append(f"timed out after {self.timeout:g}s waiting for {self._waiting_for(line)}; "
                                   "the agent was stopped")
            self.report.stopped = f"{line.where} timed out"
            return False
        for notification in later:  # the turn ended first: sent as in the recording, after it
            await self._send_line(notification)
        if answer and line.method == p.INITIALIZE:
            version = p.get_path(answer[0], "result", "protocolVersion")
            self._version = version if isinstance(version, int) else 1
        if answer and line.creates is not None:
            self.rewriter.learn(line.creates, read.created_session_id(answer[0].get("result")))
        if answer and isinstance(error := answer[0].get("error"), dict):
            report.problems.append(f"{line.method} seq {line.seq} was answered with error {error.get('code')}: "
                                   f"{str(error.get('message'))[:200]}")
        return True

    async def _settle(self, count: int) -> None:
        """Before the next line: wait until the agent has written as many lines since the last
        prompt as it had in the recording when the client sent it (an agent often writes after
        its answer: `available_commands_update` after `session/new`, suggestions after a
        turn), or until it has been quiet for `SETTLE_QUIET` seconds (it writes fewer now)."""
        while self._seen < count and not self._gone.is_set():
            self._progress = trio.Event()
            with trio.move_on_after(SETTLE_QUIET) as quiet:
                await self._progress.wait()
            if quiet.cancelled_caught:
                return

    def _waiting_for(self, line: Outgoing) -> str:
        return f"the end of the turn ({line.method} seq {line.seq})" if line.is_prompt \
            else f"the answer to {line.method} seq {line.seq}"

    async def _wait(self, answered: trio.Event, line: Outgoing, later: list[Outgoing]) -> None:
        while True:
            while later and self._seen >= later[0].before:
                await self._send_line(later.pop(0))
            if answered.is_set() and (not self._ends_at_idle(line) or self._turn_ended.is_set()
                                      or self._errored(line)):
                return
            if self._gone.is_set():
                raise AgentGone
            self._progress = trio.Event()
            await self._progress.wait()

    def _ends_at_idle(self, line: Outgoing) -> bool:
        """Does the turn `line` starts end at an idle `state_update` (ACP v2), not at the
        prompt's response? For a v2 agent, yes, unless the recording was v2 too and its turn
        ended without one (an agent that does not send them: waiting would only time out)."""
        return line.is_prompt and self._version >= 2 and (line.ends_at_idle or self.side.version < 2)

    def _errored(self, line: Outgoing) -> bool:
        request_id = line.msg.get("id") if isinstance(line.msg, dict) else None
        entry = self._waiting.get(id_key(request_id))
        return bool(entry and entry[1] and "error" in entry[1][0])

    def _abandon(self, rest: list[Outgoing]) -> None:
        for line in rest:
            if line.is_prompt:
                self.report.turn(line).problems.append("not run: the run ended before it")
                self.report.not_run.add((line.track, line.turn))

    async def _send_line(self, line: Outgoing) -> None:
        for pointer in line.redacted:
            self._say_once(f"{line.method}: {pointer} was redacted in the capture; sent as the placeholder")
        await self._send(self.rewriter.line(line))

    async def _send(self, data: bytes) -> None:
        async with self._send_lock:
            try:
                await self.stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                raise AgentGone from None

    def _say_once(self, text: str) -> None:
        if text not in self._said:
            self._said.add(text)
            self.say(text)

    async def _read(self) -> None:
        """The agent's lines, each held only while it is read; a line longer than MAX_LINE
        is counted, and its bytes dropped as they come (it was held whole, up to 256 MiB)."""
        buffer = bytearray()  # the start of the line being received
        skipping = False  # in a line past MAX_LINE: dropped up to its end
        try:
            while True:
                try:
                    chunk = await self.stream.receive_some(READ_SIZE)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    chunk = b""
                if not chunk:
                    return
                if skipping:  # the rest of a line past the limit: dropped up to its end
                    end = chunk.find(b"\n")
                    if end < 0:
                        continue
                    skipping = False
                    self._over_long()
                    chunk = chunk[end + 1:]
                if b"\n" not in chunk:  # the middle of a long line: no copy of what came before
                    buffer += chunk
                    if len(buffer) > MAX_LINE:
                        skipping, buffer = True, bytearray()  # its memory given back, not only emptied
                    continue
                *lines, rest = (bytes(buffer) + chunk if buffer else chunk).split(b"\n")
                buffer = bytearray(rest)
                for raw in lines:
                    if len(raw) > MAX_LINE:
                        self._over_long()
                    else:
                        await self._received(bytes(raw))  # the same object when it is bytes
                del lines, raw  # not held while the next bytes are awaited
                if self._lines > self.max_lines:
                    self._flooded()
                    return
        except AgentGone:  # an answer to the agent could not be written: it is gone
            return
        finally:
            self._gone.set()
            self._progress.set()

    def _over_long(self) -> None:
        self._count()
        self._say_once(f"the agent wrote a line longer than {MAX_LINE:,} bytes (the parse limit): it was not read")

    def _flooded(self) -> None:
        text = (f"the agent wrote more than {self.max_lines:,} lines, over ten times what the recording holds: "
                "it was stopped")
        self.say(text)
        if self._current is not None:
            self._current.problems.append(text)
        self.report.stopped = "the agent flooded its output"

    def _count(self) -> None:
        self._seen += 1  # every line, as the capture records every line
        self._lines += 1
        self._progress.set()

    async def _received(self, raw: bytes) -> None:
        self._count()
        frame = classify(Direction.TO_CLIENT, raw)
        msg = frame.msg
        if msg is None:
            return  # not a message (a batch, not JSON): nothing to answer or wait for
        method = msg.get("method")
        if method is None:
            entry = self._waiting.get(id_key(msg.get("id")))
            if entry is not None and not entry[0].is_set():
                entry[1].append(msg)
                entry[0].set()
            return
        if "id" in msg:
            await self._answer(frame, msg)
        elif method == p.SESSION_UPDATE and read.ends_turn_v2(read.update_of(msg)) \
                and read.session_id_of(msg) == self._turn_session:
            self._turn_ended.set()

    async def _answer(self, frame: Frame, request: Json) -> None:
        answer, recorded, why = self.side.answers.answer(request, self.rewriter)
        if answer is None:
            self.report.unanswered += 1
            if self._current is not None:
                self._current.problems.append(f"the agent asked {request.get('method')} "
                                              f"{_brief(request.get('params'))}: {why}")
            answer = p.error_response(request.get("id"), p.INTERNAL_ERROR, f"acp-bridge drive: {why}")
        elif recorded is not None:
            for pointer in recorded.redacted:
                self._say_once(f"the answer to {request.get('method')}: {pointer} was redacted in the capture; "
                               "sent as the placeholder")
        try:
            data = encode(answer, source=frame)  # the id as the agent wrote it (1.50, 100 digits)
        except Unencodable:  # a live id nested too deep to write back: no answer can reach it
            return
        await self._send(data)


def _brief(value: Any) -> str:
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        return "(params nested too deep to show)"
    return text if len(text) <= 120 else text[:119] + "…"
