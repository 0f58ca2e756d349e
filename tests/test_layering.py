"""The package's parts import one way, with no circles (docs/how-it-works.md, "Layers"):

    leaves (errors, extras, config.model) <- core <- capture <- {health, telemetry, replay, config}
        <- {shell, demo, inspector, mcp} <- setup <- commands <- __main__

Every import counts, including those inside functions and under TYPE_CHECKING: a lazy import
is still a dependency. Only `commands` imports click.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.import_graph import MODULES, graph

# A leaf imports nothing of the package but other leaves; every part may import a leaf.
LEAVES = frozenset({"acp_bridge", "acp_bridge.errors", "acp_bridge.extras", "acp_bridge.config", "acp_bridge.config.model"})
RANK = {
    "acp_bridge.core": 1,
    "acp_bridge.capture": 2, "acp_bridge.rules": 2,
    "acp_bridge.health": 3, "acp_bridge.telemetry": 3, "acp_bridge.replay": 3, "acp_bridge.config": 3,
    "acp_bridge.shell": 4, "acp_bridge.demo": 4, "acp_bridge.inspector": 4, "acp_bridge.mcp": 4,
    "acp_bridge.setup": 5,
    "acp_bridge.commands": 6,
    "acp_bridge.__main__": 7,
}


def part_of(module: str) -> str:
    if module in LEAVES:
        return module
    return ".".join(module.split(".")[:2])


def test_every_part_has_a_rank() -> None:
    parts = {part_of(m) for m in MODULES if m not in LEAVES}
    assert parts == set(RANK)


def test_leaves_import_only_leaves() -> None:
    assert {leaf: sorted(graph()[leaf] - LEAVES) for leaf in LEAVES if graph()[leaf] - LEAVES} == {}


def test_parts_import_only_lower_parts_and_leaves() -> None:
    wrong = []
    for module, targets in graph().items():
        if module in LEAVES:
            continue
        mine = part_of(module)
        for target in targets:
            theirs = part_of(target)
            if target in LEAVES or theirs == mine:
                continue
            if RANK[theirs] >= RANK[mine]:
                wrong.append(f"{module} -> {target}")
    assert sorted(wrong) == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root, targets in graph.items():
        if root in index:
            continue
        work = [(root, iter(sorted(targets)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_itself_in_a_circle() -> None:
    assert _cycles(graph()) == []


@pytest.mark.parametrize(("graph", "expected"), [
    ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set()}, []),
])
def test_the_circle_finder_finds_circles(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert _cycles(graph) == expected


def test_only_the_commands_import_click() -> None:
    users = set()
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Import) and any(a.name.split(".")[0] == "click" for a in node.names)) or (
                    isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "click"):
                users.add(module)
    assert users
    assert {m for m in users if part_of(m) != "acp_bridge.commands"} == set()


def test_no_test_module_imports_another() -> None:
    """What test files share is in a helper module of their folder (CONTRIBUTING.md): a test
    module imported by another is collected twice over and drags its tests' imports along."""
    importers = {}
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            found = [n for n in names if n.startswith("tests.") and n.rsplit(".", 1)[-1].startswith("test_")]
            if found:
                importers[str(path.relative_to(Path(__file__).parent))] = found
    assert importers == {}
