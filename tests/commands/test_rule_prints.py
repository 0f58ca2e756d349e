"""What a rule's code prints goes to stderr, never into stdout, where `run` and the served
replay write the protocol and `replay --rules --json` and `drive --json` their JSON: a real
rule file that prints when it is loaded and in a hook, stdout checked byte for byte."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from click.testing import CliRunner

from acp_bridge.commands import main
from tests.commands.helpers import ANSWERS, INIT, PROMPT, line, script
from tests.conftest import SCRIPTED_AGENT, run_cli

PRINTING = """\
import sys
from acp_bridge.rules import PASS, Rule

print("loading the rule")

class Chatty(Rule):
    name = "chatty"

    def request(self, msg, session):
        print("a request went by")
        sys.stdout.write("written too\\n")
        return PASS

rules = [Chatty()]
"""


def printing_rule(tmp_path: Path) -> Path:
    path = tmp_path / "chatty.py"
    path.write_text(PRINTING)
    return path


async def test_what_a_rule_prints_goes_to_stderr_in_run_and_replay_rules(tmp_path: Path) -> None:
    capture = tmp_path / "c.jsonl"
    args = ["run", "--no-health", "--capture", str(capture), "--rule", str(printing_rule(tmp_path)), "--",
            sys.executable, "-u", str(SCRIPTED_AGENT), str(script(tmp_path, [{"respond": ANSWERS[1]["result"]}]))]
    result = await run_cli(args, line(INIT) + line(PROMPT), timeout=20)
    assert (result.returncode, result.stdout) == (0, line(ANSWERS[0]) + line(ANSWERS[1]))
    assert result.stderr.decode().splitlines() == ["loading the rule"] + ["a request went by", "written too"] * 2

    # The same rule, silent, gives the JSON the printing one must give, byte for byte.
    silent = tmp_path / "silent" / "chatty.py"
    silent.parent.mkdir()
    silent.write_text(PRINTING.replace("print(", "(").replace("sys.stdout.write(", "("))
    replays = [CliRunner().invoke(main, ["replay", str(capture), "--rules", "--json", "--rule", str(rule)])
               for rule in (printing_rule(tmp_path), silent)]
    assert [(r.exit_code, r.stderr) for r in replays] == [
        (0, "loading the rule\n" + "a request went by\nwritten too\n" * 2), (0, "")]
    assert replays[0].stdout == replays[1].stdout
    assert isinstance(json.loads(replays[0].stdout), dict)


def test_the_rules_listing_keeps_what_a_rule_file_prints_out(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["rules", "--no-suggestions", "--no-commands-mirror", "--rule",
                                       str(printing_rule(tmp_path))])
    assert (result.exit_code, result.stdout, result.stderr) == (
        0, f" 1. chatty  {tmp_path / 'chatty.py'} (--rule)\n", "loading the rule\n")


def test_check_config_keeps_what_a_rule_file_prints_out_of_its_json(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[rules]\nfiles = ["chatty.py"]\n')
    printing_rule(tmp_path)
    result = CliRunner().invoke(main, ["check-config", str(config)])
    assert (result.exit_code, result.stderr) == (0, "loading the rule\n")
    assert json.loads(result.stdout)["rules"]["files"] == [str(tmp_path / "chatty.py")]
