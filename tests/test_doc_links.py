"""The docs link and point only to what a reader has: every relative link in README.md,
CONTRIBUTING.md and docs/*.md names a file of the repository (and, with `#anchor`, one of its
headings), and every `*.md` file a doc names in its text exists: the bridge's contract and
protocol notes once lived outside the repository, and the docs cited them as if a reader had
them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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
