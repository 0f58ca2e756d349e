"""`acp-bridge setup EDITOR`: the editor's agent settings made to start the agent through the
bridge (docs/editors.md).

Owns: the command's options (the run options are `run`'s own declarations, copied, their
environment variables left out: only what is typed goes into the entry), the bridge's and
the agent's absolute paths, the dry run (the entry and a diff on stdout) against `--write`
(the change made, said on stdout), and the exit statuses: 0 done or nothing to do, 1 a
requested entry not found, 2 usage or a file that cannot be used. Must never: write the
settings without `--write`, or write the settings of an editor whose settings are code.
"""

from __future__ import annotations

import copy
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from acp_bridge.commands import EXIT_USAGE
from acp_bridge.commands.run import run as run_command
from acp_bridge.core.printable import printable
from acp_bridge.core.rewrites import built_ins
from acp_bridge.core.rewrites.options import FILE
from acp_bridge.setup import entries as e

if TYPE_CHECKING:
    from acp_bridge.setup.settings_document import Document
    from acp_bridge.setup.settings_file import Loaded

EXIT_NOT_FOUND = 1
WRITTEN_AS_GIVEN = "; written as given"  # what `resolve_program`'s warnings end with (doctor leaves it out)
ALL = "\0all"  # what `--wrap`/`--unwrap` hold when given without a name (then --all says which)
# Run options whose values are paths: made absolute, since the editor starts the bridge in a
# working directory of its own (the built-in rules' file options too).
PATH_OPTIONS = frozenset({"config_file", "capture", "log_file", "rule_files",
                          *(option.name for built_in in built_ins() for option in built_in.options
                            if option.kind == FILE)})


def fail(message: str, status: int = EXIT_USAGE) -> NoReturn:
    warn(message)
    raise SystemExit(status)


def warn(message: str) -> None:
    """A message on stderr, its names and paths escaped (they may hold a line feed or ESC)."""
    click.echo(printable(f"acp-bridge: setup: {message}", quote_backslash=False), err=True)


def bridge_command() -> list[str]:
    """How an editor starts this bridge, by absolute path: the installed console script that is
    running (or the one beside this interpreter), else this interpreter with `-m acp_bridge`."""
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) == e.BRIDGE_PROGRAM and os.access(argv0, os.X_OK):
        return [os.path.abspath(argv0)]
    beside = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), e.BRIDGE_PROGRAM)
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return [beside]
    return [os.path.abspath(sys.executable), "-m", e.MODULE]


def resolve_program(command: str) -> tuple[str, str | None]:
    """(the path to write, a warning or None): a name looked up on PATH as a shell does, a
    relative path made absolute; one that cannot be found is written as given."""
    if os.sep in command:
        path = os.path.abspath(command)
        if not os.path.isfile(path):
            return path, f"{path} does not exist{WRITTEN_AS_GIVEN}"
        if not os.access(path, os.X_OK):
            return path, f"{path} is not executable{WRITTEN_AS_GIVEN}"
        return path, None
    found = shutil.which(command)
    if found is None:
        return command, (f"{command!r} is not on PATH{WRITTEN_AS_GIVEN} (the editor must find it on its own "
                         "PATH, or give its full path)")
    return os.path.abspath(found), None


def run_args(ctx: click.Context, options: dict[str, Any]) -> list[str]:
    """The run options typed on this command line, as `run` arguments, paths made absolute."""
    out: list[str] = []
    for param in ctx.command.params:
        if not isinstance(param, click.Option) or param.name not in options or param.name is None:
            continue
        source = ctx.get_parameter_source(param.name)
        if source is None or source.name != "COMMANDLINE":
            continue
        value = options[param.name]
        longest = max(param.opts, key=len)
        if param.count:
            out.append("-" + param.opts[0].lstrip("-")[0] * int(value) if len(param.opts[0]) == 2
                       else longest)
        elif param.is_flag:
            if value:
                out.append(longest)
        else:
            for item in (value if param.multiple else (value,)):
                text = str(item)
                out += [longest, os.path.abspath(text) if param.name in PATH_OPTIONS else text]
    return out


def _say(text: str) -> None:
    click.echo(printable(text, quote_backslash=False))


@click.command("setup", context_settings={"ignore_unknown_options": False},
               short_help="Put the bridge in front of an agent in an editor's settings.")
@click.argument("editor", type=click.Choice(e.EDITORS))
@click.argument("agent", nargs=-1, type=click.UNPROCESSED, metavar="[-- AGENT [ARG...]]")
@click.option("--name", metavar="NAME", help="The entry's name, the label the editor shows (default: the "
                                             "agent's program name, then \"(acp-bridge)\").")
@click.option("--settings", metavar="FILE", type=click.Path(dir_okay=False),
              help="The settings file to edit, instead of the one the editor uses on this platform.")
@click.option("--write", is_flag=True, help="Change the file (a backup beside it first). Without it, print "
                                           "what would change and write nothing.")
@click.option("--wrap", metavar="NAME", is_flag=False, flag_value=ALL,
              help="Turn the existing entry NAME into one that starts it through the bridge, keeping its "
                   "command, args and env (--wrap --all: every entry that does not go through it yet).")
@click.option("--unwrap", metavar="NAME", is_flag=False, flag_value=ALL,
              help="Give back the entry NAME as it was before --wrap (--unwrap --all: every wrapped entry).")
@click.option("--all", "every", is_flag=True, help="With --wrap or --unwrap: every entry.")
@click.pass_context
def setup(ctx: click.Context, /, editor: str, agent: tuple[str, ...], name: str | None, settings: str | None,
          write: bool, wrap: str | None, unwrap: str | None, every: bool, **options: Any) -> None:
    """Put the bridge in front of an agent in EDITOR's settings.

    EDITOR is zed (agent_servers in Zed's settings.json) or jetbrains (agent_servers in
    ~/.jetbrains/acp.json, read by AI Assistant and AIR): those files are edited in place,
    comments, order, indentation and trailing commas kept. For neovim-codecompanion,
    neovim-avante and emacs-agent-shell, whose settings are code, the snippet to paste is
    printed. The entry starts the bridge and the agent by absolute path, with the RUN
    OPTIONS given here (see `acp-bridge run --help`).

    Without --write nothing is written: the entry and a diff of the file are printed. Exit
    status 0: done, or nothing to do; 1: a requested entry is not there; 2: a usage error,
    or a settings file that cannot be read.
    """
    config_file = options.pop("config_file", None)
    options["config_file"] = config_file
    _check_mode(ctx, agent, wrap, unwrap, every)
    typed = run_args(ctx, options)
    if unwrap is not None and typed:
        raise click.UsageError("--unwrap: takes no run options", ctx)
    if agent:
        from acp_bridge.config import command_problem

        if (problem := command_problem(agent)) is not None:
            fail(f"the agent command after -- {problem}")
    if editor in e.PRINTED:
        _print_snippet(ctx, editor, agent, name, typed, given_a_file=settings is not None or write)
        return
    edit = _Edit.open(editor, settings, bool(agent))
    if agent:
        edit.add_agent(editor, agent, name, typed)
        status = 0
    else:
        status = edit.wrap_or_unwrap(editor, wrap, unwrap, typed)
    edit.finish(write, status)


def _check_mode(ctx: click.Context, agent: tuple[str, ...], wrap: str | None, unwrap: str | None,
                every: bool) -> None:
    """A usage error unless one of `-- AGENT`, `--wrap` and `--unwrap` is given, each `--all`
    and NAME where they belong."""
    modes = [flag for flag, given in (("-- AGENT", bool(agent)), ("--wrap", wrap is not None),
                                      ("--unwrap", unwrap is not None)) if given]
    if len(modes) != 1:
        raise click.UsageError("give one of -- AGENT, --wrap NAME|--all or --unwrap NAME|--all", ctx)
    for chosen in (wrap, unwrap):
        if chosen == ALL and not every:
            raise click.UsageError("--wrap/--unwrap: give NAME or --all", ctx)
        if chosen not in (None, ALL) and every:
            raise click.UsageError("--all: not with a NAME", ctx)
    if every and wrap is None and unwrap is None:
        raise click.UsageError("--all: only with --wrap or --unwrap", ctx)


def _print_snippet(ctx: click.Context, editor: str, agent: tuple[str, ...], name: str | None, typed: list[str],
                   *, given_a_file: bool) -> None:
    """For an editor whose settings are code: the snippet to paste, printed."""
    if not agent:
        raise click.UsageError(f"{editor}: its settings are code; give the agent: -- AGENT [ARG...]", ctx)
    if given_a_file:
        raise click.UsageError(f"{editor}: its settings are code; --settings and --write do not apply "
                               "(the snippet is printed to paste)", ctx)
    program, warning = resolve_program(agent[0])
    if warning:
        warn(warning)
    command = [*bridge_command(), e.RUN, *typed, e.SEPARATOR, program, *agent[1:]]
    where, text = e.snippet(editor, name or e.default_name(agent), command, agent)
    _say(f"Paste this {where}:")
    click.echo()
    click.echo(text, nl=False)


def read_settings(editor: str, settings: str | None,
                  refuse: Callable[[str], NoReturn] = fail) -> tuple[Path, Loaded, Document]:
    """The editor's settings file (or the one `--settings` names): its path, what was read,
    and its document; `refuse` (a usage error, exit 2) when it cannot be read or parsed
    (`setup` and `doctor --editor` read it alike)."""
    from acp_bridge.setup import settings_document as sd
    from acp_bridge.setup import settings_file as sf

    if (problem := sd.missing_library()) is not None:
        refuse(problem)
    path = Path(settings) if settings is not None else sf.settings_path(editor, dict(os.environ),
                                                                          os.path.expanduser("~"))
    try:
        loaded = sf.load(path)
        return path, loaded, sd.Document(loaded.text or "", str(path))
    except sf.SettingsError as exc:
        refuse(str(exc))


class _Edit:
    """One settings file being edited: its document, and the changes said so far."""

    def __init__(self, path: Path, loaded: Loaded, document: Document, *, for_agent: bool) -> None:
        self.path = path
        self.loaded = loaded
        self.document = document
        self.for_agent = for_agent  # `-- AGENT` says its entry itself
        self.present = document.entries()
        self.changes: list[str] = []
        self.bridge = bridge_command()

    @classmethod
    def open(cls, editor: str, settings: str | None, for_agent: bool) -> _Edit:
        """The editor's settings file (or the one `--settings` names), read; a usage error
        (exit 2) when it cannot be."""
        return cls(*read_settings(editor, settings), for_agent=for_agent)

    def apply(self, entry_name: str, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        """Entry `entry_name` made `new`: added, or only its changed keys set and removed."""
        from acp_bridge.setup import settings_file as sf

        if old is None:
            self.document.set_entry(entry_name, new)
            self.changes.append(f"added {entry_name!r}")
            return
        to_set, to_remove = e.changed_keys(old, new)
        for key, value in to_set.items():
            self.document.set_key(entry_name, key, value)
        for key in to_remove:
            self.document.remove_key(entry_name, key)
        if to_set or to_remove:
            self.changes.append(f"changed {entry_name!r}")
            if not self.for_agent:
                args = new.get("args", [])
                _say(f"{entry_name!r}: {sf.words([new['command'], *(args if isinstance(args, list) else [])])}")

    def add_agent(self, editor: str, agent: tuple[str, ...], name: str | None, typed: list[str]) -> None:
        """`-- AGENT`: its entry added, or the one set up before changed."""
        from acp_bridge.setup import settings_file as sf

        program, warning = resolve_program(agent[0])
        if warning:
            warn(warning)
        entry_name = name or e.default_name(agent)
        old = self.present.get(entry_name)
        env = old.get("env") if isinstance(old, dict) and isinstance(old.get("env"), dict) else None
        new = e.build_entry(editor, self.bridge, typed, [program, *agent[1:]], env)
        if isinstance(old, dict):  # the editor's own keys of an entry set up before stay
            new = _merged(old, new)
        self.apply(entry_name, old if isinstance(old, dict) else None, new)
        _say(f"{entry_name!r}: {sf.words([new['command'], *new['args']])}")

    def wrap_or_unwrap(self, editor: str, wrap: str | None, unwrap: str | None, typed: list[str]) -> int:
        """`--wrap` or `--unwrap` of each entry named (every one with `--all`); the exit
        status: 1 when a named entry is not there or cannot be wrapped."""
        status = 0
        chosen_name = wrap if wrap is not None else unwrap
        names = list(self.present) if chosen_name == ALL else [str(chosen_name)]
        for entry_name in names:
            old = self.present.get(entry_name)
            if not isinstance(old, dict):
                warn(f"no agent entry {entry_name!r} in {self.path}"
                     + (f" (there: {', '.join(map(repr, self.present))})" if self.present else ""))
                status = EXIT_NOT_FOUND
                continue
            through = e.bridged(old)
            try:
                if wrap is not None:
                    if through is not None:
                        _say(f"{entry_name!r} already goes through the bridge")
                        continue
                    self.apply(entry_name, old, e.wrap(old, self.bridge, typed, entry_name, editor))
                else:
                    if through is None:
                        if chosen_name != ALL:
                            _say(f"{entry_name!r} does not go through the bridge; nothing to unwrap")
                        continue
                    self.apply(entry_name, old, e.unwrap(old, entry_name))
            except e.CannotWrap as exc:
                warn(str(exc))
                if chosen_name != ALL:
                    status = EXIT_NOT_FOUND
        return status

    def finish(self, write: bool, status: int) -> None:
        """Nothing to change said, or the diff printed (no `--write`), or the file written;
        then exit with `status`."""
        from acp_bridge.setup import settings_file as sf

        loaded, path = self.loaded, self.path
        after = self.document.text()
        if after == (loaded.text or "") or not self.changes:
            _say(f"{path}: nothing to change")
            raise SystemExit(status)
        if not write:
            click.echo(_shown_diff(sf.diff(loaded.text or "", after, str(path))), nl=False)
            _say(f"{'; '.join(self.changes)} (not written: add --write to change {path})")
            raise SystemExit(status)
        try:
            kept = sf.write(loaded, after)
        except sf.SettingsError as exc:
            fail(str(exc))
        shown = f"{path}" + (f" (the file {loaded.target})" if loaded.target != Path(os.path.abspath(path)) else "")
        _say(f"{'; '.join(self.changes)} in {shown}" + (
            "" if kept is None else f"; the original is kept in {kept.path}" if kept.made
            else f"; the original, from before setup first wrote it, is still kept in {kept.path}"))
        if loaded.links > 1:
            warn(f"{loaded.target} had {loaded.links} hard links; only this name holds the new text, the others "
                 "still hold the old one")
        raise SystemExit(status)


def _shown_diff(text: str) -> str:
    """The diff with what could act on a terminal escaped: each line made `printable`, its
    line end and its tabs (a file's indentation) kept."""
    return "".join("\t".join(printable(part, quote_backslash=False) for part in line.split("\t")) + "\n"
                   for line in text.splitlines())


def _merged(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """`new` over an entry set up before: its keys in their old order, the editor's own keys
    that `new` does not set kept, new keys after them."""
    out = {key: new.get(key, value) for key, value in old.items()}
    out.update({key: value for key, value in new.items() if key not in out})
    return out


def _without_envvar(param: click.Parameter) -> click.Parameter:
    copied = copy.copy(param)
    if isinstance(copied, click.Option):
        copied.envvar = None
        copied.show_envvar = False
    return copied


# The run options, as `run` declares them (copies: click keeps state on a parameter), without
# their ACP_BRIDGE_* variables: the entry holds what was typed, not this shell's environment.
setup.params.extend(_without_envvar(param) for param in run_command.params if isinstance(param, click.Option))
