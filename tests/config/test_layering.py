"""Inside config the modules import one way too (tests/test_layering.py checks the package):
the model, then the file's schema, then the file reader, then the layers above the file.
A lazy import counts: it is still a dependency."""

from __future__ import annotations

from tests.import_graph import graph

# Lowest first; `acp_bridge.config` (the package) is the model's import surface.
ORDER = ("acp_bridge.config.model", "acp_bridge.config", "acp_bridge.config.schema", "acp_bridge.config.paths",
         "acp_bridge.config.text_files",
         "acp_bridge.config.rule_tables",
         "acp_bridge.config.file",
         "acp_bridge.config.layers", "acp_bridge.config.rules")


def test_every_config_module_has_a_place() -> None:
    assert {m for m in graph() if m == "acp_bridge.config" or m.startswith("acp_bridge.config.")} == set(ORDER)


def test_config_modules_import_only_those_below_them() -> None:
    upward = [f"{module} -> {target}" for rank, module in enumerate(ORDER)
              for target in sorted(graph()[module]) if target in ORDER[rank + 1:]]
    assert upward == []
