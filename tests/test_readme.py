"""The README's instructions agree with what they describe: the two optional test inputs are
the ones .ci/run installs and the tests look for, and the install section is there."""

from __future__ import annotations

from tests.conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
CI = (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_readme_says_how_to_get_the_tests_a_fresh_machine_skips() -> None:
    for needed in ("@agentclientprotocol/sdk", "npm pack", "apt-get", "install -y", "chromium"):
        assert needed in CI and needed in README, needed
    assert ".schemas/package/schema/" in README
    assert '".schemas" / "package" / "schema"' in (ROOT / "tests" / "test_schema.py").read_text(encoding="utf-8")


def test_readme_says_how_to_install_for_an_editor() -> None:
    section = README.split("## Install for your editor", 1)[1].split("\n## ", 1)[0]
    for needed in ("pipx install .", "uv tool install .", ".venv/bin/acp-bridge", "command -v"):
        assert needed in section, needed
