"""`retriage list`: the stored issues with the current model's labels, filtered — the library call behind the
command (options checked here, so that a bad value is a one-line error wherever it comes from)."""

from __future__ import annotations

from dataclasses import dataclass

from retriage import taxonomy
from retriage.core.days import parse_day
from retriage.core.errors import UserError
from retriage.db import queries, versions
from retriage.taxonomy.versions import parse_filter

STATES = ("open", "closed")


@dataclass
class ListFilter:
    engines: tuple[str, ...] = ()
    re_class: str | None = None
    component: str | None = None
    fix: str | None = None
    state: str | None = None
    since: str | None = None
    until: str | None = None
    unsure: bool | None = None
    sort: str = "created"
    limit: int = 20
    version: str | None = None  # a release (0.26), an exact version (0.26.0, b5432), main, unknown or LO..HI


def _choice(value: str | None, choices, option: str) -> str | None:
    if value is None:
        return None
    if value not in choices:
        raise UserError(f"{option} must be one of {', '.join(choices)}, not {value!r}", exit_code=2)
    return value


def list_issues(con, f: ListFilter, model_version: str | None) -> list[dict]:
    repos: list[str] = []
    for name in f.engines:
        e = taxonomy.engine_by_alias(name)
        if e is None:
            raise UserError(f"--engine must be one of {', '.join(x.id for x in taxonomy.engines())}, not {name!r}",
                            exit_code=2)
        repos += [e.repo, *e.former_repos]
    if not 1 <= f.limit <= 100000:
        raise UserError(f"--limit must be between 1 and 100000, not {f.limit}", exit_code=2)
    since, until = parse_day(f.since, "--since"), parse_day(f.until, "--until")
    if since and until and since > until:
        raise UserError(f"--since {since} is after --until {until}", exit_code=2)
    try:
        version = parse_filter(f.version)
    except ValueError as e:
        raise UserError(f"--version: {e}", exit_code=2) from None
    rows = queries.list_issues(
        con, model_version, repos or None,
        re_class=_choice(f.re_class, taxonomy.re_class_ids(), "--class"),
        component=_choice(f.component, taxonomy.component_ids(), "--component"),
        fix=_choice(f.fix, taxonomy.fix_tag_ids(), "--fix"), state=_choice(f.state, STATES, "--state"),
        since=since, until=until, unsure=f.unsure, sort=_choice(f.sort, tuple(queries.LIST_SORTS), "--sort"),
        limit=f.limit if version is None else 100000)
    if version is not None:  # the issues on that version (db/versions.py), in the same order
        keys = versions.matching(con, version)
        rows = [r for r in rows if (r["repo"], r["number"]) in keys][:f.limit]
    from retriage.classifier.decision import unchecked_note

    for r in rows:  # a prediction stored before its note was (schema version 4): the note it would carry
        if r["made_by"] is None and not r["corrected"]:
            r["note"] = unchecked_note(r["re_class"], r["known_fixes"])
    return rows
