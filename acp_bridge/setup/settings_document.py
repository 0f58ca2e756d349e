"""An editor's settings text (JSON with comments), its agent entries edited in place.

Owns: parsing the text through the `setup` extra's JSONC library, json-five, whose model keeps
comments, key order, indentation and trailing commas of everything it is not asked to change
(`Document`); reading the `agent_servers` entries as plain values; setting an entry or one of
its keys, or removing a key, with whitespace and comments moved so the text reads as before
(CRLF line ends in a file that has only those); and saying when the library is missing.
Must never: read or write a file (`settings_file` does), or give back text that differs
from what was read anywhere but where it was asked to change it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from acp_bridge.setup.entries import SERVERS_KEY
from acp_bridge.setup.settings_file import SettingsError

DEFAULT_UNIT = "  "  # Zed's and JetBrains' own files indent by two spaces
# The modules of json-five the edit uses (its import name is `json5`, which another package,
# `json5` on PyPI, also uses: asking for `json5.model` tells them apart).
LIBRARY_MODULES = ("json5.model", "json5.loader", "json5.dumper")
_LONE_LF = re.compile(r"(?<!\r)\n")


def _parse(text: str, where: str) -> Any:
    from json5.loader import ModelLoader, loads
    from json5.utils import JSON5DecodeError

    try:
        return loads(text, loader=ModelLoader())
    except JSON5DecodeError as exc:
        # At the end of the text (a file that is only a comment) the library says line 0.
        line = exc.lineno if exc.lineno and exc.lineno > 0 else text.count("\n") + (not text.endswith("\n"))
        raise SettingsError(f"{where}:{line}: {_first_problem(str(exc.msg))}; the file is left as it "
                            "is") from exc
    except RecursionError as exc:
        raise SettingsError(f"{where}: nested too deep to read; the file is left as it is") from exc
    except Exception as exc:  # the library's own failures on odd input: refused all the same
        raise SettingsError(f"{where}: cannot be read as JSON with comments ({exc}); the file is left as it "
                            "is") from exc


def _first_problem(message: str) -> str:
    """json-five lists every error it met; the first is the one to fix."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    for index, line in enumerate(lines):
        if line.startswith("The primary error was") and index + 1 < len(lines):
            return _without_position(lines[index + 1])
    return _without_position(lines[0]) if lines else "not JSON"


def _without_position(line: str) -> str:
    return line.split(" at: line ", 1)[0].rstrip(".")


def _dump(node: Any) -> str:
    from json5.dumper import ModelDumper, dumps

    return str(dumps(node, dumper=ModelDumper()))  # type: ignore[arg-type]  # its stub names the base class only


def _value(node: Any) -> Any:
    """What a node of the model means, as plain Python (dicts, lists, str, numbers)."""
    import json5

    return _plain(json5.loads(_dump(node)))


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, str):
        # json-five reads the escapes of an astral character (`\\ud83d\\ude00`) as two lone
        # surrogates: joined here, as the editor reads them; a lone one stays alone.
        text = str(value)
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass") if _LONE.search(
            text) else text
    return value


_LONE = re.compile("[\ud800-\udfff]")


def _json(value: Any) -> str:
    """`value` as JSON text, non-ASCII as it is, a lone surrogate (which no UTF-8 text can
    hold) as its escape."""
    return _LONE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(value, ensure_ascii=False))


def _key_text(key: Any) -> str:
    import json5

    if hasattr(key, "name"):  # an unquoted JSON5 identifier
        return str(key.name)
    raw = str(key.raw_value)
    if "\\" not in raw:  # no escape: the text between the quotes is the key (no parse per key)
        return raw[1:-1]
    return str(_plain(json5.loads(raw)))


def _render(value: Any, unit: str, level: int) -> str:
    """`value` as JSON text indented for `level`: objects one member a line, a list of plain
    values on one line (how people write `args`)."""
    inner, outer = unit * (level + 1), unit * level
    if isinstance(value, dict):
        if not value:
            return "{}"
        members = [f"{inner}{_json(key)}: {_render(item, unit, level + 1)}"
                   for key, item in value.items()]
        return "{\n" + ",\n".join(members) + "\n" + outer + "}"
    if isinstance(value, list):
        if all(not isinstance(item, (dict, list)) for item in value):
            return "[" + ", ".join(_json(item) for item in value) + "]"
        return "[\n" + ",\n".join(inner + _render(item, unit, level + 1) for item in value) + "\n" + outer + "]"
    return _json(value)


def _indent_unit(text: str) -> str:
    """The file's indentation step: the leading whitespace of its first indented member."""
    for line in text.splitlines():
        stripped = line.lstrip(" \t")
        if stripped[:1] in ('"', "'") and len(stripped) < len(line):
            lead = line[:len(line) - len(stripped)]
            return "\t" if lead.startswith("\t") else lead
    return DEFAULT_UNIT


def _split_tail(wsc: list[Any]) -> tuple[list[Any], str]:
    """A whitespace-and-comments list cut into what stays on the line (comments) and the
    final whitespace (the line break and indentation before what follows)."""
    if wsc and isinstance(wsc[-1], str):
        return list(wsc[:-1]), wsc[-1]
    return list(wsc), ""


class Document:
    """A settings file's text as json-five's model: read, `agent_servers` entries set or
    their keys removed, and written back as text that differs only where it was changed."""

    def __init__(self, text: str, where: str) -> None:
        self.original = text
        self.where = where
        body = text if text.strip() else "{\n}\n"
        self._bom = body.startswith("\ufeff")
        self.model = _parse(body[1:] if self._bom else body, where)
        from json5.model import JSONObject

        if not isinstance(self.model.value, JSONObject):
            raise SettingsError(f"{where}: the file holds no JSON object at its top; the file is left as it is")
        try:
            again = _dump(self.model)
        except RecursionError as exc:  # json-five reads deeper than it writes
            raise SettingsError(f"{where}: nested too deep to read; the file is left as it is") from exc
        if again != (body[1:] if self._bom else body):  # what is not changed must come back as it was
            raise SettingsError(f"{where}: json-five would not write its text back as it is; the file is left "
                                "as it is")
        self._servers(create=False)  # an `agent_servers` that is no object is refused here, once
        self.unit = _indent_unit(body)
        # A file whose every line ends in CRLF (Windows) gets CRLF in what is inserted too.
        self._crlf = "\r\n" in body and body.count("\n") == body.count("\r\n")

    def text(self) -> str:
        text = _dump(self.model)
        if self._crlf:
            text = _LONE_LF.sub("\r\n", text)
        return ("\ufeff" if self._bom else "") + text

    def _members(self, node: Any) -> list[tuple[str, Any]]:
        return [(_key_text(key), value) for key, value in zip(node.keys, node.values, strict=True)]

    def _find(self, node: Any, key: str) -> int | None:
        """The index of `key` in the object `node`: the last one, as a JSON reader keeps it."""
        found = None
        for index, (name, _) in enumerate(self._members(node)):
            if name == key:
                found = index
        return found

    def _servers(self, create: bool) -> Any:
        from json5.model import JSONObject

        root = self.model.value
        index = self._find(root, SERVERS_KEY)
        if index is None:
            if not create:
                return None
            self._insert(root, SERVERS_KEY, {}, 0)
            index = self._find(root, SERVERS_KEY)
            assert index is not None
        node = root.values[index]
        if not isinstance(node, JSONObject):
            raise SettingsError(f"{self.where}: {SERVERS_KEY} is not an object; the file is left as it is")
        return node

    def entries(self) -> dict[str, Any]:
        """The `agent_servers` entries, by name, as plain values (a name given twice: the last)."""
        servers = self._servers(create=False)
        if servers is None:
            return {}
        return {name: _value(node) for name, node in self._members(servers)}

    def set_entry(self, name: str, entry: dict[str, Any]) -> None:
        """Add the entry `name`, whole, at the end of `agent_servers` (made if missing)."""
        servers = self._servers(create=True)
        index = self._find(servers, name)
        if index is None:
            self._insert(servers, name, entry, 1)
        else:
            self._replace(servers, index, entry, 2)

    def set_key(self, name: str, key: str, value: Any) -> None:
        """Set one key of the existing entry `name`: its value replaced where it is, or the key
        added at the end of the entry; the entry's other keys and comments untouched."""
        from json5.model import JSONObject

        servers = self._servers(create=False)
        index = self._find(servers, name) if servers is not None else None
        if servers is None or index is None or not isinstance(servers.values[index], JSONObject):
            raise KeyError(name)
        entry = servers.values[index]
        at = self._find(entry, key)
        if at is None:
            self._insert(entry, key, value, 2)
        else:
            self._replace(entry, at, value, 3)

    def remove_key(self, name: str, key: str) -> None:
        servers = self._servers(create=False)
        index = self._find(servers, name) if servers is not None else None
        if servers is None or index is None:
            raise KeyError(name)
        entry = servers.values[index]
        at = self._find(entry, key)
        if at is not None:
            self._remove(entry, at)

    # -- the model edits: whitespace and comments moved so the text reads as before ------

    def _node(self, value: Any, level: int) -> Any:
        return _parse(_render(value, self.unit, level), "the new value").value

    def _replace(self, obj: Any, index: int, value: Any, level: int) -> None:
        from json5.model import JSONArray

        old = obj.values[index]
        if isinstance(old, JSONArray) and self._ends_alike(old, value, level):
            return
        new = self._node(value, level)
        new.wsc_before, new.wsc_after = list(old.wsc_before), list(old.wsc_after)
        if (isinstance(old, JSONArray) and isinstance(new, JSONArray) and old.trailing_comma is not None
                and new.values and not isinstance(value[-1], (dict, list))):
            new.trailing_comma = old.trailing_comma  # `["--acp",]` stays written so, on one line
        obj.values[index] = new

    def _ends_alike(self, old: Any, value: Any, level: int) -> bool:
        """`old`, an array, made the list of strings `value` by putting words before its own
        (`wrap`) or taking its first ones away (`unwrap`), its own nodes kept with the comments
        among them; False (nothing done) when `value` is not such a change of it."""
        if not isinstance(value, list) or not value or not all(isinstance(item, str) for item in value):
            return False
        had = [_value(node) for node in old.values]
        if not had or had == value:
            return False
        if len(value) > len(had) and value[-len(had):] == had:
            added = self._node(value[:-len(had)], level).values
            gap = self._item_gap(old)
            for node in added:
                node.wsc_before, node.wsc_after = [gap], []
            added[0].wsc_before = []  # after the array's own leading whitespace, as its first was
            old.values[0].wsc_before = [gap]
            old.values[:0] = added
            return True
        if len(value) < len(had) and had[-len(value):] == value:
            del old.values[:len(had) - len(value)]
            first = old.values[0]
            if all(isinstance(part, str) for part in first.wsc_before):
                first.wsc_before = []
            return True
        return False

    @staticmethod
    def _item_gap(array: Any) -> str:
        """The whitespace between two items of `array`: a space on one line, or the line
        break and indentation its items are written with."""
        for node in array.values[1:]:
            if node.wsc_before and isinstance(node.wsc_before[-1], str):
                return str(node.wsc_before[-1])
        lead = array.leading_wsc[-1] if array.leading_wsc and isinstance(array.leading_wsc[-1], str) else ""
        return str(lead) if "\n" in lead else " "

    def _insert(self, obj: Any, key: str, value: Any, level: int) -> None:
        """Append `key: value` to the object `obj`, which sits at `level` (root 0)."""
        from json5.model import DoubleQuotedString

        inline = obj.keys and not any("\n" in part for part in self._gaps(obj) if isinstance(part, str))
        inner = self.unit * (level + 1)
        new_key = DoubleQuotedString(key, raw_value=_json(key))
        new_value = self._node(value, level + 1)
        new_value.wsc_before = [" "]  # `"key": value`, as JSON is written by hand
        if not obj.keys:
            kept, _ = _split_tail(list(obj.leading_wsc))
            obj.leading_wsc = [*kept, "\n" + inner]
            new_value.wsc_after = ["\n" + self.unit * level]
            if obj.trailing_comma is not None:  # `{,}` is no JSON; a lone comma has nothing to trail
                obj.trailing_comma = None
        elif obj.trailing_comma is not None:
            comments, closing = _split_tail(list(obj.trailing_comma.wsc_after))
            new_key.wsc_before = [*comments, ("\n" + inner) if not inline else " "]
            obj.trailing_comma.wsc_after = [closing]
        else:
            last = obj.values[-1]
            comments, closing = _split_tail(list(last.wsc_after))
            # A comment after the last member stays on its line, after the comma now added.
            last.wsc_after = []
            new_key.wsc_before = [*comments, ("\n" + inner) if not inline else " "]
            new_value.wsc_after = [closing]
        obj.keys.append(new_key)
        obj.values.append(new_value)

    def _gaps(self, obj: Any) -> list[Any]:
        parts: list[Any] = list(obj.leading_wsc)
        for key, value in zip(obj.keys, obj.values, strict=True):
            parts += [*key.wsc_before, *value.wsc_after]
        if obj.trailing_comma is not None:
            parts += list(obj.trailing_comma.wsc_after)
        return parts

    def _remove(self, obj: Any, index: int) -> None:
        key, value = obj.keys[index], obj.values[index]
        last = index == len(obj.keys) - 1
        del obj.keys[index], obj.values[index]
        if not last:
            return
        if not obj.keys:
            if obj.trailing_comma is not None:
                obj.leading_wsc = list(obj.trailing_comma.wsc_after)
                obj.trailing_comma = None
            else:
                kept, _ = _split_tail(list(obj.leading_wsc))
                obj.leading_wsc = [*kept, *value.wsc_after]
        elif obj.trailing_comma is None:
            previous = obj.values[-1]
            previous.wsc_after = [*previous.wsc_after, *value.wsc_after]
        del key


def missing_library() -> str | None:
    from acp_bridge.extras import missing

    return missing(LIBRARY_MODULES, "acp-bridge setup edits the settings with json-five", "setup")
