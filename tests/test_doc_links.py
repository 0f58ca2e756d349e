"""The docs link and point only to what a reader has: every relative link in README.md,
CONTRIBUTING.md and docs/*.md names a file of the repository (and, with `#anchor`, one of its
headings), and every `*.md` file a doc names in its text exists: the bridge's contract and
protocol notes once lived outside the repository, and the docs cited them as if a reader had
them. Every `--option` the docs name is one a command has (they once named `--telemetry`,
which none has), every config key they name (`[relay] grace_seconds`, `capture.path`) is
one the file takes, and editors.md's table of variables names each variable of `run`."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from acp_bridge.commands import COMMANDS, main
from acp_bridge.config.schema import array_schema, schema
from tests.conftest import ROOT

DOCS = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
NAMED_MD = re.compile(r"(?<![\w/.-])([\w./-]+\.md)\b")


def prose(text: str) -> str:
    """`text` without its fenced code blocks (examples, not links)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, code marks and punctuation out, spaces
    to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(line.lstrip("#")) for line in prose(path.read_text(encoding="utf-8")).splitlines()
            if line.startswith("#")}


def broken_links(doc: Path) -> list[str]:
    broken = []
    for target in LINK.findall(prose(doc.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}: no such heading")
    return broken


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(doc: Path) -> None:
    assert broken_links(doc) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_every_markdown_file_named_exists(doc: Path) -> None:
    # web addresses and code spans that hold a command line are not names of files here
    text = re.sub(r"`([^`]*)`", lambda span: "" if " " in span[1] else span[1],
                  re.sub(r"https?://\S+", "", prose(doc.read_text(encoding="utf-8"))))
    named = set(NAMED_MD.findall(text))
    assert sorted(name for name in named if not any((base / name).exists() for base in (doc.parent, ROOT))) == []


def test_a_broken_link_and_a_missing_heading_are_found(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Who gets what (bridge-rules 2.1)\n")
    doc = tmp_path / "b.md"
    doc.write_text("[ok](a.md#who-gets-what-bridge-rules-21) [gone](gone.md) [bad](a.md#nope) "
                   "[web](https://x.org/y.md)\n```\n[in code](gone.md)\n```\n")
    assert broken_links(doc) == ["gone.md: no such file", "a.md#nope: no such heading"]


# Options the docs name that belong to other programs: an agent's (`my-agent --acp`), the
# secrets the capture masks in a command line, claude, docker, npm, pip, pytest and the
# benchmark (`python -m bench`). performance-history.md is a record of past runs, not read.
OTHER_PROGRAMS = {"--acp", "--flag", "--token", "--api-key", "--env", "--header", "--author", "--scope", "--rm",
                  "--prefix", "--platform", "--only-binary", "--pdb", "--cov", "--cov-report",
                  "--lines", "--pairs", "--repeat", "--rounds", "--quick", "--skip", "--export-messages"}
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def command_options() -> set[str]:
    ctx = click.Context(main)
    return {name for command in map(main.load, COMMANDS) for param in command.get_params(ctx)
            if isinstance(param, click.Option) for name in (*param.opts, *param.secondary_opts)}


def test_every_option_the_docs_name_is_one_a_command_has() -> None:
    known = command_options() | OTHER_PROGRAMS
    named = {(doc.relative_to(ROOT).as_posix(), option) for doc in DOCS if doc.name != "performance-history.md"
             for option in OPTION.findall(doc.read_text(encoding="utf-8"))}
    assert sorted((doc, option) for doc, option in named if option not in known) == []


def test_editors_md_names_each_variable_of_run() -> None:
    table = set(re.findall(r"^\| `(ACP_BRIDGE_\w+)` \|", (ROOT / "docs" / "editors.md").read_text(encoding="utf-8"),
                           flags=re.M))
    assert table == {param.envvar for param in main.load("run").params if isinstance(param.envvar, str)}


def test_every_config_key_the_docs_name_is_one_the_file_takes() -> None:
    tables = {**schema(), **array_schema()}
    named = set()
    for doc in DOCS:
        for span in re.findall(r"`([^`\n]+)`", doc.read_text(encoding="utf-8")):
            keys = re.findall(r"^\[\[?(\w+)\]\]? (\w+)", span) or re.findall(r"^(\w+)\.(\w+)$", span)
            named |= {(doc.name, f"{table}.{key}") for table, key in keys
                      if table in tables and key not in ("py", "md")}
    assert len(named) > 50  # the pattern still finds them
    assert sorted((doc, key) for doc, key in named if key.split(".")[1] not in tables[key.split(".")[0]]) == []
