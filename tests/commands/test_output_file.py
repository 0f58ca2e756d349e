"""The files the commands write (`export --html`, `check --junit`, `replay --rules --write`),
through the CLI (in this process, but where a FIFO could make it block): a path that is there but is no regular file or symlink (a device, a
FIFO, a socket, a folder) is refused in one line, exit 2, and left exactly as it was; a
regular file is replaced whole, and a symlink replaced, never written through."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path

import pytest
from click.testing import CliRunner

from acp_bridge.commands import main
from tests.cli_helpers import peer_on_call
from tests.golden.record import CAPTURE_CONFIG, CASES
from tests.replay.drive import GOLDEN

NAME = "v2-resume-spec-dialect"
CAPTURE = GOLDEN / f"{NAME}.jsonl"
RECORDED = [o for o in CASES[NAME]["options"] if o not in ("-c", CAPTURE_CONFIG)]


def command(option: str, out: Path | str, capture: Path = CAPTURE) -> list[str]:
    """The command that writes `out` through `option`."""
    if option == "--html":
        return ["export", str(capture), "--html", str(out)]
    if option == "--junit":
        return ["check", str(capture), "--junit", str(out)]
    return ["replay", str(capture), "--rules", *RECORDED, "--write", str(out)]


def acp_bridge(args: list[str], *, child: bool = False) -> subprocess.CompletedProcess[str]:
    """The CLI in this process, or with `child` in a process of its own (the timeout fails
    a regression that blocks)."""
    if child:
        return subprocess.run([sys.executable, "-m", "acp_bridge", *args], capture_output=True, text=True,
                              timeout=60, check=False, stdin=subprocess.DEVNULL)
    result = CliRunner().invoke(main, args)
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


OPTIONS = ["--html", "--junit", "--write"]


def identity(path: Path | str) -> tuple[int, int, int, int, int]:
    info = os.lstat(path)
    return info.st_dev, info.st_ino, info.st_mode, info.st_rdev, info.st_size


@pytest.fixture(params=["fifo", "directory", "socket", "device"])
def special(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """Something at the output path that is no regular file, and the kind the refusal names."""
    path = tmp_path / "out"
    kind: str = request.param
    if kind == "fifo":
        os.mkfifo(path)  # nobody reads it: opening it for writing would block for ever
        yield path, "a FIFO"
    elif kind == "directory":
        path.mkdir()
        (path / "inside").write_text("keep")
        yield path, "a directory"
    elif kind == "socket":
        with socket.socket(socket.AF_UNIX) as server:
            server.bind(str(path))
            yield path, "a socket"
    else:
        try:  # /dev/null's twin, so that a regression replaces this one and not the real one
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("making a device needs root")
        yield path, "a character device"


@pytest.mark.parametrize("option", OPTIONS)
def test_a_path_that_is_no_regular_file_is_refused_and_left_as_it_is(option: str, special: tuple[Path, str]) -> None:
    """A FIFO nobody reads would block an open for writing for ever: --html is asked of a
    real process, the others here with a reader on call (`peer_on_call`)."""
    path, kind = special
    before = identity(path)
    fifo = kind == "a FIFO"
    with peer_on_call(path, writer=False) if fifo and option != "--html" else nullcontext():
        done = acp_bridge(command(option, path), child=fifo and option == "--html")
    assert (done.returncode, done.stdout, done.stderr) == (
        2, "", f"acp-bridge: {option}: {path} is {kind}, not a regular file; it is left as it is\n")
    assert identity(path) == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["out"]  # no partial file left behind


@pytest.mark.parametrize("option", OPTIONS)
def test_dev_null_is_left_as_it_is(option: str, tmp_path: Path) -> None:
    """As root, a rename over /dev/null would replace the device every process shares."""
    if os.geteuid() == 0:  # first a twin in tmp_path: a regression fails there, harmlessly
        twin = tmp_path / "null"
        os.mknod(twin, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        assert acp_bridge(command(option, twin)).returncode == 2 and stat.S_ISCHR(identity(twin)[2])
    before = identity("/dev/null")
    done = acp_bridge(command(option, "/dev/null"))
    assert (done.returncode, done.stderr) == (
        2, f"acp-bridge: {option}: /dev/null is a character device, not a regular file; it is left as it is\n")
    assert identity("/dev/null") == before and stat.S_ISCHR(before[2])


def test_a_bad_junit_path_is_refused_before_the_capture_is_read(tmp_path: Path) -> None:
    """Not a capture either: only the --junit refusal is said, since nothing was read."""
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("not a capture\n")
    done = acp_bridge(command("--junit", tmp_path, garbage))
    assert (done.returncode, done.stdout, done.stderr) == (
        2, "", f"acp-bridge: --junit: {tmp_path} is a directory, not a regular file; it is left as it is\n")


@pytest.mark.parametrize("option", OPTIONS)
def test_a_path_ending_in_a_slash_is_refused(option: str, tmp_path: Path) -> None:
    out = f"{tmp_path}/new/"
    done = acp_bridge(command(option, out))
    assert (done.returncode, done.stderr) == (
        2, f"acp-bridge: {option}: {out} names a directory, not a file; nothing was written\n")
    assert list(tmp_path.iterdir()) == []


FIRST_BYTES = {"--html": "<!DOCTYPE", "--junit": "<?xml", "--write": '{"type":"header"'}


@pytest.mark.parametrize("option", OPTIONS)
def test_a_regular_file_is_replaced_whole(option: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.write_text("old content, longer than nothing")
    done = acp_bridge(command(option, out))
    assert done.returncode in (0, 1), done.stderr
    assert out.read_text().startswith(FIRST_BYTES[option])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.parametrize("option", OPTIONS)
def test_a_symlink_is_replaced_and_never_written_through(option: str, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    out = tmp_path / "out"
    out.symlink_to(victim)
    done = acp_bridge(command(option, out))
    assert done.returncode in (0, 1), done.stderr
    assert victim.read_text() == "keep me" and not out.is_symlink()
    assert out.read_text().startswith(FIRST_BYTES[option])


@pytest.mark.parametrize("unwinding", ["clean", "raises OSError", "fails"])
def test_sigterm_while_a_file_is_written_whole_leaves_nothing_and_exits_143(tmp_path: Path, unwinding: str) -> None:
    """SIGTERM mid-write removes the partial file; whatever the unwinding raises after it (a
    write cut short, a command's `fail`), the exit is SIGTERM's, 128+15 (CI once saw 1), and
    SIGTERM's default action is back afterwards."""
    import signal

    from acp_bridge.commands.captures import fail
    from acp_bridge.commands.output_file import written_whole

    def write() -> None:
        with written_whole(str(tmp_path / "out.html")) as file:
            file.write(b"half a page")
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                signal.sigtimedwait([], 0)  # a call after the kill: the handler has run by its end
            except SystemExit:
                if unwinding == "raises OSError":
                    raise OSError(28, "No space left on device") from None
                if unwinding == "fails":
                    fail("export: cannot write: No space left on device", status=1)
                raise
            pytest.fail("SIGTERM did not stop the block")

    with pytest.raises(SystemExit) as ended:
        write()
    assert (ended.value.code, os.listdir(tmp_path), signal.getsignal(signal.SIGTERM)) == (143, [], signal.SIG_DFL)


def test_sigterm_keeps_a_handler_someone_else_set(tmp_path: Path) -> None:
    """A handler already set (a server's, a test runner's) is theirs: left in place, and it
    runs, not ours."""
    import signal

    from acp_bridge.commands.output_file import written_whole

    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        with written_whole(str(tmp_path / "out.html")) as file:
            file.write(b"page")
            os.kill(os.getpid(), signal.SIGTERM)
            signal.sigtimedwait([], 0)
        assert (seen, (tmp_path / "out.html").read_bytes()) == ([signal.SIGTERM], b"page")
    finally:
        signal.signal(signal.SIGTERM, previous)
