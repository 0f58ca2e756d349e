"""The code map in docs/how-it-works.md ("Where the code lives") names every module of the
package, and every module or folder it names exists: a module moved, added or removed shows
here until the map says so."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import acp_bridge
from tests.conftest import ROOT

PACKAGE = Path(acp_bridge.__file__).parent
HOW_IT_WORKS = (ROOT / "docs" / "how-it-works.md").read_text(encoding="utf-8")


def named_in_map(doc: str) -> set[str]:
    """What the first column of the map's table names: `x.py` modules and `x/` folders,
    relative to acp_bridge/."""
    section = doc.split("\n## Where the code lives\n", 1)[1].split("\n## ", 1)[0]
    named = set()
    for line in section.splitlines():
        if line.startswith("| ") and not line.startswith(("| module ", "|---")):
            named |= set(re.findall(r"`([^`]+)`", line.split(" | ", 1)[0]))
    return named


def in_package(package: Path) -> set[str]:
    """Every module, as its path; a package's `__init__.py` counts as its folder (`core/`),
    but for the top level's, which is `__init__.py`."""
    found = set()
    for path in package.rglob("*.py"):
        relative = path.relative_to(package).as_posix()
        if path.name == "__init__.py" and path.parent != package:
            relative = relative.removesuffix("__init__.py")
        found.add(relative)
    return found


def test_the_map_names_every_module_and_only_modules_that_exist() -> None:
    named, present = named_in_map(HOW_IT_WORKS), in_package(PACKAGE)
    assert {"missing from the map": sorted(present - named), "not in the package": sorted(named - present)} == {
        "missing from the map": [], "not in the package": []}


def test_the_package_walk_counts_folders_by_their_init(tmp_path: Path) -> None:
    for name in ("__init__.py", "errors.py", "core/__init__.py", "core/relay.py", "core/rewrites/__init__.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).touch()
    assert in_package(tmp_path) == {"__init__.py", "errors.py", "core/", "core/relay.py", "core/rewrites/"}


@pytest.mark.parametrize(("row", "expected"), [
    ("| `core/relay.py` | `Relay.feed`: bytes in |", {"core/relay.py"}),
    ("| `__init__.py`, `__main__.py` | the version |", {"__init__.py", "__main__.py"}),
    ("| `core/` | pure; see `core/lines.py` |", {"core/"}),
    ("| module | owns |", set()),
])
def test_only_the_first_column_counts(row: str, expected: set[str]) -> None:
    doc = f"# x\n\n## Where the code lives\n\n| module | owns |\n|---|---|\n{row}\n\n## Next\n\n| `gone.py` | x |\n"
    assert named_in_map(doc) == expected
