"""One way to number messages (docs/capture-format.md, "Numbering"): every command names a
record as `seq N` and a JSON-RPC id as `id N`, and none writes a bare `#N`."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from click.testing import CliRunner

from acp_bridge.capture.catalog import Catalog
from acp_bridge.commands import main
from acp_bridge.mcp.tools import Tools
from tests.conftest import ROOT

GOLDEN = ROOT / "tests" / "golden"
V1 = GOLDEN / "v1-legacy-air-meta.jsonl"
UNLOCK = GOLDEN / "v1-new-client-unlock.jsonl"
BARE = re.compile(r"#\d")


def run(*args: str | Path) -> str:
    return CliRunner().invoke(main, [str(arg) for arg in args]).stdout


def test_show_check_replay_diff_and_the_mcp_tools_write_seq_and_id_alike(tmp_path: Path, utc: None) -> None:
    show = run("show", V1).splitlines()
    assert show[2:4] == ["03:19:43.379 -> session/new id 1 204B->251B [rewrite: system-prompt] [redacted]",
                         "03:19:43.379 <- session/new id 1 ok 0.7ms (sess_air_1) 67B"]

    check = run("check", V1).splitlines()
    assert "  info    legacy-suggestions (2x)  seq 10, 18" in check

    rules = run("replay", V1, "--rules", "--no-suggestions").splitlines()
    assert rules[1].startswith('seq 3 -> session/new: changed {"/params/_meta":')

    diff = run("diff", V1, UNLOCK).splitlines()
    assert "session 1 turn 1: missing from B: A seq 7 <- session/request_permission" in diff
    assert "session 1 turn 2: extra in B: B seq 20 (before A seq 19) -> session/cancel" in diff
    assert diff[3].startswith('session 1 turn 1: A seq 5 / B seq 5 -> session/prompt: /params/prompt/0/text ')

    for capture in (V1, UNLOCK):
        shutil.copy(capture, tmp_path / capture.name)
    tools = Tools(Catalog([str(tmp_path)]))
    shown = tools.show_messages(V1.name, methods=["session/new"])
    assert shown.splitlines() == ["seq 3 03:19:43.379 -> session/new id 1 204B->251B [rewrite: system-prompt] [redacted]",
                                  "seq 4 03:19:43.379 <- session/new id 1 ok 0.7ms (sess_air_1) 67B"]
    compared = tools.diff_captures(V1.name, UNLOCK.name)
    assert (f"session 1 turn 1: missing from {UNLOCK.name}: {V1.name} seq 7 <- session/request_permission"
            in compared.splitlines())
    problems = tools.find_problems(V1.name)
    assert '"seq":10' in problems

    for name, text in [("show", "\n".join(show)), ("check", "\n".join(check)), ("replay --rules", "\n".join(rules)),
                       ("diff", "\n".join(diff)), ("show_messages", shown), ("diff_captures", compared),
                       ("find_problems", problems)]:
        assert not BARE.search(text), (name, BARE.findall(text))
