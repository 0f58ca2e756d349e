"""The README and CONTRIBUTING.md agree with what they describe: the README's quickstart is two
commands and CI runs its test command; the optional test inputs CONTRIBUTING.md names are the
ones .ci/run installs and the tests look for; the install section is there."""

from __future__ import annotations

import re

from tests.conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
CONTRIBUTING = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
CI = (ROOT / ".ci" / "run").read_text(encoding="utf-8")

DEMO = "python3 -m venv .venv && .venv/bin/pip install -q . && .venv/bin/acp-bridge demo"
TESTS = "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/python -m pytest -q"


def _section(text: str, heading: str) -> str:
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_quickstart_is_two_commands_and_ci_runs_the_test_command() -> None:
    blocks = re.findall(r"```sh\n(.*?)```", _section(README, "Quickstart"), flags=re.DOTALL)
    assert blocks == [DEMO + "\n", TESTS + "\n"]
    assert f"\n{TESTS}\n" in CI
    assert f"\n{TESTS}\n" in CONTRIBUTING


def test_contributing_says_how_to_get_the_tests_a_fresh_machine_skips() -> None:
    assert "CONTRIBUTING.md" in _section(README, "Quickstart")
    for needed in ("@agentclientprotocol/sdk", "npm pack", "apt-get", "install -y", "chromium",
                   "npm install", "--prefix .sdk-ts @agentclientprotocol/sdk zod",
                   "--prefix .conductor @thinkwell/conductor@0.5.7"):
        assert needed in CI and needed in CONTRIBUTING, needed
    assert ".schemas/package/schema/" in CONTRIBUTING
    assert '".schemas" / "package" / "schema"' in (ROOT / "tests" / "core" / "test_schema.py").read_text(encoding="utf-8")
    for command in (".venv/bin/ruff check .", ".venv/bin/python -m mypy", ".venv/bin/python -m bench",
                    ".venv/bin/python -m pytest -q --cov=acp_bridge"):
        assert command in CONTRIBUTING, command
    assert ".venv/bin/ruff check ." in CI and ".venv/bin/python -m mypy" in CI
    assert '"pytest-cov' in _extra("test")  # the coverage command works on a fresh machine


def _extra(name: str) -> str:
    """One optional-dependency list of pyproject.toml, as written."""
    return (ROOT / "pyproject.toml").read_text(encoding="utf-8").split(f"\n{name} = [\n", 1)[1].split("\n]", 1)[0]


def test_readme_says_how_to_install_for_an_editor() -> None:
    section = _section(README, "Install for your editor")
    for needed in ("pipx install .", "uv tool install .", ".venv/bin/acp-bridge", "command -v"):
        assert needed in section, needed
    commands = re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    assert [line.split("#")[0].split()[:2] for line in commands[0].splitlines()] == [
        ["acp-bridge", "setup"], ["acp-bridge", "doctor"]]
