"""The built-ins' declared options (core/rewrites/options.py) against the configuration: each
names a key of the file, whose field in `config/model.py` has the declared default; a choice is
checked by the file's reader as declared; the names the bridge's own work carries are reserved."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_bridge.config import Config
from acp_bridge.config.file import config_from_dict
from acp_bridge.config.rules import RESERVED
from acp_bridge.config.schema import FILE_ONLY_KEYS, schema
from acp_bridge.core.rewrites import built_ins
from acp_bridge.core.rewrites.options import CHOICE, FILE, Option
from acp_bridge.errors import ConfigError
from tests.config.conftest import field_value

DECLARED = [option for built_in in built_ins() for option in built_in.options]
OPTIONS = [pytest.param(option, id=option.name) for option in DECLARED]


@pytest.mark.parametrize("option", OPTIONS)
def test_each_option_is_a_key_of_the_file_with_its_default(option: Option) -> None:
    assert option.field in schema()[option.table]
    if option.kind == FILE:  # read into its rule's text: no field of its own
        assert FILE_ONLY_KEYS[option.table][option.field] == (str,)
    else:
        assert field_value(Config(), option.key) == option.default


def test_each_switch_is_a_setting_and_the_defaults_turn_on_what_the_docs_say() -> None:
    assert {built_in.name: built_in.is_on(Config()) for built_in in built_ins()} == {
        "stray-output": False, "suggestions": True, "system-prompt": False, "commands-mirror": True,
        "close-tool-calls": False}


@pytest.mark.parametrize("option", [pytest.param(o, id=o.name) for o in DECLARED if o.kind == CHOICE])
def test_a_declared_choice_is_checked_by_the_file(option: Option) -> None:
    for choice in option.choices:
        assert field_value(config_from_dict({option.table: {option.field: choice}}), option.key) == choice
    with pytest.raises(ConfigError) as caught:
        config_from_dict({option.table: {option.field: "sideways"}}, Path("b.toml"))
    assert str(caught.value) == f"b.toml: {option.key}: 'sideways' is not one of {', '.join(option.choices)}"


def test_the_reserved_names_are_the_built_ins_and_the_bridges_answers() -> None:
    assert sorted(RESERVED) == ["bridge", "close-tool-calls", "commands-mirror", "stray-output", "suggestions",
                                "system-prompt"]
