"""`acp_bridge.rules`, the public surface for writing a rule: it is the one the built-in rules
are written against (not a second API), it names what docs/rules.md documents, and it loads
no more than the core."""

from __future__ import annotations

import subprocess
import sys

import acp_bridge.rules as api
from acp_bridge.core.rewrites import base
from acp_bridge.core.rewrites.suggestions import PromptSuggestions
from acp_bridge.core.rewrites.system_prompt import SystemPrompt
from acp_bridge.core.rewrites.table import Match, TableRule
from acp_bridge.core.session import Connection
from tests.conftest import ROOT


def test_the_built_in_rules_are_rules_of_the_public_api() -> None:
    assert api.Rule is base.Rule is base.Rewrite
    assert all(issubclass(cls, api.Rule) for cls in (PromptSuggestions, SystemPrompt, TableRule))
    assert (api.PASS, api.DROP, api.Replace, api.Emit) == (base.PASS, base.DROP, base.Replace, base.Emit)
    assert api.Match is Match  # the one matcher: a [[rewrite]] table's is one (tests/core/rewrites/test_table.py)


def test_the_session_offers_the_facts_a_hook_may_read() -> None:
    facts: api.SessionFacts = Connection()  # checked by mypy: Connection implements the protocol
    assert (facts.client_ready, facts.protocol_version, facts.v2, facts.client_caps, facts.agent_caps,
            facts.pending(api.Direction.TO_AGENT)) == (False, None, False, {}, {}, [])


def test_every_name_is_documented() -> None:
    doc = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    assert api.API_VERSION == 1
    assert [name for name in api.__all__ if f"`{name}" not in doc] == []


def test_importing_it_loads_neither_trio_nor_click_nor_the_configuration() -> None:
    code = ("import sys, acp_bridge.rules\n"
            "print(','.join(m for m in ('trio', 'click', 'acp_bridge.config', 'acp_bridge.shell') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
