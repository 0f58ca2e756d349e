"""`acp-bridge check CAPTURE...`: findings and the migration report, afterwards.

Owns: reading the captures through the one reader, strictly (a line that is not a record is
unreadable input: exit 2 with one line naming the file and line; a torn last line, as a
killed bridge may leave, is skipped and said), the text report (grouped by finding, with the seqs to `show`), `--json`,
`--junit FILE` (one test case per connection and finding code) and the exit status
(`--fail-on`: 0 clean, 1 findings at or above the level, 2 unreadable input). Must never:
write to a capture, or import jsonschema unless `--schema` is given.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from acp_bridge.capture import junit
from acp_bridge.capture.files import open_capture
from acp_bridge.capture.reader import UnreadableCapture
from acp_bridge.commands.captures import fail, say
from acp_bridge.commands.output_file import NotAFile, refuse_special, written_whole
from acp_bridge.core.printable import printable
from acp_bridge.health.findings import CODES, Finding, Level
from acp_bridge.health.offline import Report, analyse

if TYPE_CHECKING:
    from acp_bridge.config.model import HealthConfig
    from acp_bridge.health.schema import Validator

EXIT_FINDINGS, EXIT_UNREADABLE = 1, 2
SEQS_SHOWN = 12


@click.command(short_help="Check captures for problems and whether the bridge is needed.")
@click.argument("captures", nargs=-1, required=True, type=click.Path(), metavar="CAPTURE...")
@click.option("--fail-on", type=click.Choice(["warning", "error"]), default="warning", show_default=True,
              help="Exit 1 when a finding at or above this level is found.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of text.")
@click.option("--junit", metavar="FILE", type=click.Path(),
              help="Also write a JUnit XML file: one test case per capture and finding code.")
@click.option("-c", "--config", "config_file", metavar="FILE", type=click.Path(dir_okay=False),
              help="Take the thresholds from this config file's [health] table (default: the defaults).")
@click.option("--schema", "schema_dir", metavar="DIR", type=click.Path(file_okay=False),
              help="Validate every message against the ACP JSON schema in DIR (the npm package "
                   "@agentclientprotocol/sdk); needs the jsonschema package.")
def check(captures: tuple[str, ...], fail_on: str, as_json: bool, junit: str | None, config_file: str | None,
          schema_dir: str | None) -> None:
    """Check captures for protocol problems and say whether each pair still needs the bridge.

    Computes the findings of docs/health.md from each CAPTURE (one connection each; captures
    of older versions too), and a migration report: which suggestion form each side used,
    what the bridge converted or took out, which system-prompt dialect carried the prompt,
    and a verdict in one sentence. The thresholds are the defaults, or those of --config
    (give the file the bridge ran with). Exit status: 0 clean, 1 findings at or above
    --fail-on, 2 unreadable input.
    """
    if junit is not None:
        try:
            refuse_special(junit)  # before any capture is read
        except NotAFile as exc:
            fail(f"--junit: {exc}")
    health = _health_config(config_file)
    validator = _schema_validator(schema_dir)
    reports, unreadable = _checked(captures, health, validator)
    threshold = Level.WARNING if fail_on == "warning" else Level.ERROR
    failed = any((report.worst() or 0) >= threshold for report in reports)
    if as_json:
        click.echo(json.dumps({"captures": [r.as_json() for r in reports], "fail_on": fail_on,
                               "failed": failed}, indent=2, default=str))
    else:
        for report in reports:
            for text in report_text(report):
                click.echo(text)
    if junit is not None:
        _write_junit(junit, reports, threshold, with_schema=validator is not None)
    if unreadable:
        raise SystemExit(EXIT_UNREADABLE)
    raise SystemExit(EXIT_FINDINGS if failed else 0)


def _health_config(config_file: str | None) -> HealthConfig | None:
    """The thresholds of --config (None: the defaults); an error if the file is broken."""
    if config_file is None:
        return None
    from acp_bridge.config.layers import load_config
    from acp_bridge.errors import ConfigError

    try:
        return load_config(config_file).health
    except ConfigError as exc:
        fail(str(exc))
    return None


def _schema_validator(schema_dir: str | None) -> Validator | None:
    """The validator of --schema (None without it); an error if the schema cannot be read."""
    if schema_dir is None:
        return None
    from acp_bridge.health.schema import SchemaError, Validator

    try:
        return Validator(schema_dir)
    except SchemaError as exc:
        fail(str(exc))
    return None


def _checked(captures: tuple[str, ...], health: HealthConfig | None,
             validator: Validator | None) -> tuple[list[Report], bool]:
    """Each capture's report (with the schema's findings first when validated), and whether
    one could not be read (said on stderr)."""
    reports: list[Report] = []
    unreadable = False
    for path in captures:
        try:
            extra: list[Finding] = []
            if validator is not None:
                from acp_bridge.health.schema import SchemaError, schema_findings

                try:
                    with open_capture(path) as reader:  # a first pass, streamed as the second
                        extra = schema_findings(validator, reader)
                except SchemaError as exc:
                    fail(str(exc))
            with open_capture(path) as reader:
                reports.append(analyse(path, reader, health, extra=extra))
            say(reader)
        except UnreadableCapture as exc:
            click.echo(f"acp-bridge: {printable(str(exc), quote_backslash=False)}", err=True)
            unreadable = True
        except Exception as exc:  # a bug: said as such, and never exit 1, which means "findings"
            click.echo(f"acp-bridge: {path}: internal error while checking: {type(exc).__name__}: {exc}", err=True)
            unreadable = True
    return reports, unreadable


def _write_junit(junit: str, reports: list[Report], threshold: Level, *, with_schema: bool) -> None:
    """The reports as JUnit XML in `junit`, written whole; an error if it cannot be."""
    try:
        with written_whole(junit) as file:
            file.write(junit_xml(reports, threshold, with_schema=with_schema).encode("utf-8"))
    except NotAFile as exc:
        fail(f"--junit: {exc}")
    except OSError as exc:
        fail(f"--junit: cannot write {junit}: {exc.strerror or exc}")


def _seqs(findings: list[Finding]) -> list[int]:
    return sorted({f.seq for f in findings if f.seq is not None})


def report_text(report: Report) -> list[str]:
    """The report of one capture, for a person: what came from the wire (names, session ids,
    the texts of findings, which quote ids) made `printable`."""
    parts = [f"{report.messages} messages"]
    if report.version is not None:
        parts.append(f"protocol v{report.version}")
    if report.client:
        parts.append(f"client {printable(report.client)}")
    if report.agent:
        parts.append(f"agent {printable(report.agent)}")
    if not report.ended:
        parts.append("no end record (the bridge did not close it)")
    lines = [f"{report.path}: {', '.join(parts)}"]
    groups = report.grouped()
    if not groups:
        lines.append("  no findings")
    for code, findings in groups:
        level = CODES[code].level.label
        seqs = _seqs(findings)
        shown = ", ".join(str(s) for s in seqs[:SEQS_SHOWN]) + (", …" if len(seqs) > SEQS_SHOWN else "")
        lines.append(f"  {level:7} {code} ({report.counts[code]}x)" + (f"  seq {shown}" if seqs else ""))
        if findings:
            example = findings[0]
            where = f" (session {printable(str(example.session))})" if example.session is not None else ""
            lines.append(f"          e.g. {example.text}{where}")
        lines.append(f"          {CODES[code].advice}")
    migration = report.migration
    lines.append(f"  suggestions: the client reads {_form(migration.client_form)}; the agent sent "
                 f"{migration.agent_legacy} legacy and {migration.agent_new} new; the client received "
                 f"{migration.client_legacy} legacy and {migration.client_new} new; the bridge wrote "
                 f"{migration.written} (withdrawals: {migration.withdrawals}) and took out {migration.taken_out}")
    dialects = ", ".join(f"{d} {n}x" for d, n in sorted(migration.dialects.items())) or "none injected"
    lines.append(f"  system prompt: {dialects}")
    lines.append(f"  verdict: {migration.verdict()}")
    if groups:
        lines.append(f"  to see them in place: acp-bridge show {_quoted(report.path)} --findings")
    # Rule and dialect names come from the capture's records too (which anyone can write):
    # a last pass, which leaves what is escaped already as it is.
    return [printable(line, quote_backslash=False) for line in lines]


def _form(client_form: str) -> str:
    return {"new": "the new form", "legacy (AIR only)": "the legacy form only (AIR)", "both": "both forms",
            "none": "no suggestions", "unknown": "? (no initialize in the capture)"}.get(client_form, client_form)


def _quoted(path: str) -> str:
    import shlex

    return shlex.quote(path)


def junit_xml(reports: list[Report], threshold: Level, *, with_schema: bool) -> str:
    """JUnit XML (capture/junit.py): a test suite per capture, a test case per finding code."""
    return junit.junit_xml("acp-bridge check", [_suite(report, threshold, with_schema=with_schema)
                                                for report in reports])


def _suite(report: Report, threshold: Level, *, with_schema: bool) -> junit.Suite:
    name = Path(report.path).stem
    cases = []
    grouped = dict(report.grouped())
    for code, info in CODES.items():
        if code == "schema-invalid" and not with_schema:
            continue
        if code not in report.counts:
            cases.append(junit.Case(f"acp-bridge.check.{name}", code))
            continue
        body = "\n".join(f"seq {f.seq}: {f.text}" for f in grouped.get(code, []))
        message = f"{info.level.label}: {info.meaning} ({report.counts[code]}x)"
        if info.level >= threshold:
            cases.append(junit.Case(f"acp-bridge.check.{name}", code,
                                    failure=junit.Failure(message, info.level.label, f"{body}\n{info.advice}")))
        else:
            cases.append(junit.Case(f"acp-bridge.check.{name}", code, system_out=f"{message}\n{body}"))
    return junit.Suite(report.path, cases, system_out=f"verdict: {report.migration.verdict()}")
