"""What a built-in rule declares about itself, as data: its name, what turns it on, its settings.

Owns: `Option` (one setting: its config key, command-line flag, environment variable, default
and help) and `BuiltIn` (a rule's declaration: the rule, the key that turns it on, its options,
where `run --help` lists them). Each built-in rule declares its `BuiltIn` in its own module,
as `DECLARED`; `acp_bridge.core.rewrites.built_ins()` collects them. The layers above turn the
declarations into what they need: `commands/run.py` into click options and the overrides of
the file, `config/` into checks of the file and the reserved names. Must never: import click
or the configuration (the core sits below both), or hold a value of a run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# How an option is given (`Option.kind`):
FLAG = "flag"  # a flag that turns its key on (`--close-tool-calls`: key = true)
OFF_FLAG = "off-flag"  # a flag that turns its key off (`--no-suggestions`: key = false)
CHOICE = "choice"  # one of `choices`
TEXT = "text"  # text; with a FILE option of the same rule, the two are one setting (the text's key)
FILE = "file"  # a file whose text is the setting of the rule's TEXT option

DEFAULT_RANK = 80  # after the built-ins' options in `run --help`, before the bridge's own


@dataclass(frozen=True)
class Option:
    """One setting of a built-in rule, however it is given.

    `name`: the option's parameter name (`close_tool_calls`); `key`: its dotted config key
    (`repair.close_tool_calls`, a table and a key of the file, which `config/model.py`'s
    dataclasses hold); `flag`: its command-line spelling; `envvar`: its `ACP_BRIDGE_*`
    variable; `default`: the key's value when nothing gives it; `help`: what `run --help`
    says, to which the config key is added (`[config: key]`, with `= true` or `= false` for
    a flag).
    """

    name: str
    key: str
    flag: str
    envvar: str
    help: str
    kind: str = FLAG
    default: Any = None
    choices: tuple[str, ...] = ()
    metavar: str | None = None

    @property
    def table(self) -> str:
        return self.key.split(".", 1)[0]

    @property
    def field(self) -> str:
        return self.key.split(".", 1)[1]

    @property
    def is_flag(self) -> bool:
        return self.kind in (FLAG, OFF_FLAG)

    def full_help(self) -> str:
        """The help `run --help` shows: `help`, then where the file sets it."""
        said = {FLAG: " = true", OFF_FLAG: " = false"}.get(self.kind, "")
        return f"{self.help} [config: {self.key}{said}]"

    def value(self, given: Any) -> Any:
        """The key's value for what a layer above the file gave (a flag's True or False)."""
        return (not given) if self.kind == OFF_FLAG else given


@dataclass(frozen=True)
class BuiltIn:
    """A built-in rule's declaration.

    `name`: its name, its provenance in captures, `stats`, `check`, telemetry and logs (the
    rule's own `name`); `rule`: what makes it, given its settings table (`settings`, the
    configuration's table of that name; None: it takes none), or where it is
    (`"package.module:Class"`, imported only when it runs: a rule costly to import); None for a
    repair the relay runs itself (stray output). It runs when the value at `switch` is not one of `off`.
    `options`: its settings; `rank`: where `run --help` lists them.
    """

    name: str
    switch: str
    options: tuple[Option, ...] = ()
    rule: Callable[..., Any] | str | None = None
    settings: str | None = None
    off: tuple[Any, ...] = (False, None)
    rank: int = DEFAULT_RANK

    def is_on(self, config: Any) -> bool:
        value = value_at(config, self.switch)
        return not any(value is off or value == off for off in self.off)

    def make(self, config: Any) -> Any:
        """The rule, configured from `config` (a `Config`, or anything with its tables)."""
        make = self.rule
        if isinstance(make, str):
            module, _, name = make.partition(":")
            # The import statement's own machinery (importlib's is not seen by -X importtime).
            make = getattr(__import__(module, fromlist=(name,)), name)
        assert make is not None
        if self.settings is None:
            return make()
        return make(getattr(config, self.settings))


def value_at(config: Any, key: str) -> Any:
    """The value at a dotted key of `config` (`repair.close_tool_calls`)."""
    value = config
    for part in key.split("."):
        value = getattr(value, part)
    return value
