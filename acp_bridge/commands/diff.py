"""`acp-bridge diff A B`: two captures compared message by message (replay/compare.py).

Owns: the options, reading both captures through the one reader (strictly: a line that is
no record is bad input, exit 2), the text and `--json` outputs, and the exit status: 0 the
same, 1 different, 2 bad input. Must never: write to a capture.
"""

from __future__ import annotations

import click

from acp_bridge.commands.captures import CAPTURE, dumps_json, fail, reading, say
from acp_bridge.core.pointer import parse_pointer

EXIT_DIFFERENT = 1


@click.command(short_help="Compare two captures, session by session and turn by turn.")
@click.argument("a", type=CAPTURE)
@click.argument("b", type=CAPTURE)
@click.option("--ignore", "ignore", multiple=True, metavar="POINTER",
              help="A JSON pointer into the message (RFC 6901, e.g. /params/_meta) whose value, and what is "
                   "under it, is not compared. Repeatable.")
@click.option("--strict-ids", is_flag=True,
              help="Compare ids (JSON-RPC, tool call, message, terminal) and session ids too; by default they "
                   "may differ.")
@click.option("--json", "as_json", is_flag=True, help="Print the differences as JSON instead of text.")
def diff(a: str, b: str, ignore: tuple[str, ...], strict_ids: bool, as_json: bool) -> None:
    """Compare two captures, session by session and turn by turn.

    Sessions (in the order they were created) and turns are aligned, then their messages
    (a longest common subsequence over direction, method and update kind). Prints each
    message missing from B or extra in B, and for aligned messages the JSON pointers whose
    values differ. Times, ids and session ids are not compared unless --strict-ids is given.
    Exit status 0: the same; 1: different; 2: bad input."""
    from acp_bridge.replay.compare import DiffOptions, compare_tracks
    from acp_bridge.replay.turns import tracks

    for pointer in ignore:
        try:
            parse_pointer(pointer)
        except ValueError as exc:
            fail(f"--ignore: {exc}")
    with reading(a, strict=True) as reader_a:
        tracks_a = tracks(reader_a)
    with reading(b, strict=True) as reader_b:
        tracks_b = tracks(reader_b)
    result = compare_tracks(tracks_a, tracks_b, DiffOptions(ignore=ignore, strict_ids=strict_ids))
    if as_json:
        click.echo(dumps_json({"a": a, "b": b, **result.as_json()}))
    else:
        for line in result.lines():
            click.echo(line)
    say(reader_a)
    say(reader_b)
    raise SystemExit(0 if result.same else EXIT_DIFFERENT)
