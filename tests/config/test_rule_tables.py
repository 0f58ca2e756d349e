"""`[rules]` and the `[[rewrite]]` tables (config/rule_tables.py): read into their settings,
and every mistake one error naming the file, the table (by position and line) and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_bridge.config import RewriteConfig, RulesConfig
from acp_bridge.config.file import read_config
from tests.config.conftest import refused, write

GOOD = """\
[rules]
files = ["rules/a.py", "/abs/b.py"]
enable = ["pkg-rule"]

[[rewrite]]
name = "no-usage-updates"
direction = "to-client"
update = "usage_update"
drop = true

# a comment between tables
[[rewrite]]
method = "session/prompt"
where = { "/params/_meta/x" = 1, "/params/sessionId" = "s" }
set = { "/params/_meta/y" = { z = [1.5, true] } }
remove = ["/params/z"]
"""


def test_tables_read_into_their_settings(tmp_path: Path) -> None:
    config = read_config(write(tmp_path, GOOD))
    assert config.rules == RulesConfig(files=(f"{tmp_path}/rules/a.py", "/abs/b.py"), enable=("pkg-rule",))
    assert config.rewrite == (
        RewriteConfig(name="no-usage-updates", direction="to-client", update="usage_update", drop=True, line=5),
        RewriteConfig(name="rewrite-2", method="session/prompt", where={"/params/_meta/x": 1, "/params/sessionId": "s"},
                      set={"/params/_meta/y": {"z": [1.5, True]}}, remove=("/params/z",), line=12),
    )


def test_inline_tables_have_no_line(tmp_path: Path) -> None:
    config = read_config(write(tmp_path, 'rewrite = [{ update = "x", drop = true }]\n'))
    assert config.rewrite == (RewriteConfig(name="rewrite-1", update="x", drop=True),)


@pytest.mark.parametrize(("toml", "error"), [
    ('[[rewrite]]\nupdate = "x"\ndrop = true\nmethods = "y"\n',
     "rewrite[1] (line 1).methods: unknown key (known: name, direction, method, update, where, drop, set, remove)"),
    ('[[rewrite]]\nupdate = "x"\n', 'rewrite[1] (line 1): does nothing: give drop = true, set = {...} or remove = [...]'),
    ('[[rewrite]]\nupdate = "x"\ndrop = false\n',
     "rewrite[1] (line 1): does nothing: give drop = true, set = {...} or remove = [...]"),
    ('[[rewrite]]\ndrop = true\n', "rewrite[1] (line 1).drop: with no method, update or where, this would drop "
                                   "every message"),
    ('[[rewrite]]\nupdate = "x"\ndrop = true\nremove = ["/a"]\n',
     "rewrite[1] (line 1).drop: drops the message: set and remove would never apply; give one or the other"),
    ('[[rewrite]]\nupdate = "x"\ndirection = "out"\ndrop = true\n',
     "rewrite[1] (line 1).direction: 'out' is not one of to-client, to-agent, both"),
    ('[[rewrite]]\nupdate = "x"\nwhere = { "a/b" = 1 }\ndrop = true\n',
     "rewrite[1] (line 1).where: 'a/b' is not a JSON pointer (RFC 6901: starts with /)"),
    ('[[rewrite]]\nupdate = "x"\nset = { "/a~2" = 1 }\n',
     "rewrite[1] (line 1).set: '/a~2' is not a JSON pointer (RFC 6901: ~ is written ~0 and / is written ~1)"),
    ('[[rewrite]]\nupdate = "x"\nset = { "" = 1 }\n',
     'rewrite[1] (line 1).set: "" is the whole message: a rule replaces or drops a message, not sets it'),
    ('[[rewrite]]\nupdate = "x"\nremove = [1]\n', "rewrite[1] (line 1).remove: 1 is not a JSON pointer (a string, RFC 6901)"),
    ('[[rewrite]]\nupdate = "x"\nset = { "/a" = 1979-05-27 }\n',
     "rewrite[1] (line 1).set.'/a': a TOML date is not a JSON value (write it as a string)"),
    ('[[rewrite]]\nupdate = "x"\nset = { "/a" = [nan] }\n', "rewrite[1] (line 1).set.'/a': nan is not a JSON number"),
    # TOML's integers are 64-bit (tomllib reads any): past that, no message could be written
    # with it (set: the rule failed on every message) nor match it (where).
    ('[[rewrite]]\nupdate = "x"\nset = { "/a" = {b = [99999999999999999999]} }\n',
     "rewrite[1] (line 1).set.'/a': 99999999999999999999 is beyond TOML's 64-bit integers (write it as a string)"),
    ('[[rewrite]]\nupdate = "x"\nwhere = { "/a" = -9223372036854775809 }\ndrop = true\n',
     "rewrite[1] (line 1).where.'/a': -9223372036854775809 is beyond TOML's 64-bit integers (write it as a string)"),
    ('[[rewrite]]\nupdate = "x"\nset = { "/a" = 1 }\n[[rewrite]]\nmethod = ""\ndrop = true\n',
     "rewrite[2] (line 4).method: is empty"),
    ('[[rewrite]]\nname = "a\\u0007b"\nupdate = "x"\ndrop = true\n',
     "rewrite[1] (line 1).name: 'a\\x07b' is not a name (not empty, no control characters)"),
    ('[[rewrite]]\nupdate = 5\ndrop = true\n', "rewrite[1] (line 1).update: expected a string, got int"),
    ('[[rewrite]]\nupdate = "x"\ndrop = 1\n', "rewrite[1] (line 1).drop: expected a boolean, got int"),
    ('[rewrite]\nupdate = "x"\n', "rewrite: must be an array of tables ([[rewrite]] headers)"),
    ('[rules]\nfiles = [""]\n', "rules.files: '' is not a path"),
    ('[rules]\nenable = [1]\n', "rules.enable: 1 is not a name"),
    ('[rules]\nfile = ["x.py"]\n', "rules.file: unknown key (known: files, enable)"),
])
def test_bad_tables(tmp_path: Path, toml: str, error: str) -> None:
    assert refused(tmp_path, toml) == error
