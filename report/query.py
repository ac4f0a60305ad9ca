"""Options in, SQL out, for the reports: the options checked (one-line UsageError), the engines resolved, and
the SQL text of the weekly report (report.weekly). Only the filters in use are written, so DuckDB can push them
into the scan; every value stays a statement parameter ($...)."""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Iterable, Sequence

from retriage import taxonomy
from retriage.core.days import check_year, parse_day
from retriage.core.errors import UsageError

UNLABELED = "unlabeled"
UNSURE = "unsure"
ALL = "all"
MAX_WEEKS = 52 * 1000
BY_VALUES = ("re_class", "component")


def resolve_engines(names: Iterable[str] | None) -> list[taxonomy.Engine]:
    """Engine ids or aliases (also comma-separated) -> taxonomy engines, in the order given, without repeats."""
    out: list[taxonomy.Engine] = []
    for raw in names or []:
        for name in (n.strip() for n in raw.split(",")):
            if not name:
                continue
            engine = taxonomy.engine_by_alias(name)
            if engine is None:
                known = ", ".join(e.id for e in taxonomy.engines())
                raise UsageError(f"unknown engine {name!r}: use one of {known}")
            if engine not in out:
                out.append(engine)
    return out


def _parse_day(value: date | str | None, what: str) -> date | None:
    """A day: a date, 'YYYY-MM-DD' or a span back from today ('12w', '30d', '6m'; retriage.core.days)."""
    if value is None:
        return value
    if isinstance(value, datetime):
        value = value.date()
    if isinstance(value, date):
        return check_year(value, what, value.isoformat())
    return parse_day(value, what)


def _check_options(by: str, since, until, last_weeks: int | None) -> tuple[date | None, date | None]:
    """The inclusive day range, after checking every option that can be wrong."""
    if by not in BY_VALUES:
        raise UsageError(f"--by must be one of {', '.join(BY_VALUES)}, not {by!r}")
    since_day, until_day = _parse_day(since, "--since"), _parse_day(until, "--until")
    if since_day and until_day and since_day > until_day:
        raise UsageError(f"--since {since_day} is after --until {until_day}")
    if last_weeks is not None and not 1 <= last_weeks <= MAX_WEEKS:
        raise UsageError(f"the number of weeks must be from 1 to {MAX_WEEKS:,}, not {last_weeks}")
    return since_day, until_day


def _sql_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _selection_where(params: dict, dates: bool = True) -> list[str]:
    """The WHERE terms of the selection (issues or also PRs, engines, and with `dates` the day bounds); only the
    filters in use, so DuckDB can push them into the scan."""
    where = ["i.created_at IS NOT NULL"]
    if not params["include_prs"]:
        where.append("NOT i.is_pull_request")
    if params["repos"] is not None:
        where.append("list_contains($repos, i.repo)")
    if dates and params["since"] is not None:
        where.append("i.created_at >= $since")
    if dates and params["until"] is not None:
        where.append("i.created_at < $until")
    return where


def _span_sql(params: dict) -> str:
    """CTE `span`: the Monday of the first and of the last week holding a selected issue, whatever the day
    bounds (NULLs when nothing is selected). The week spine never reaches outside it: --since 1970-01-01
    --until 9998-12-31 costs what the data's own span costs, not 430,000 empty weeks."""
    if params["since"] is None and params["until"] is None:
        return "span AS (SELECT min(week) AS first, max(week) AS last FROM counts)"
    return f"""span AS (
            SELECT date_trunc('week', min(i.created_at))::DATE AS first,
                   date_trunc('week', max(i.created_at))::DATE AS last
            FROM issues i WHERE {" AND ".join(_selection_where(params, dates=False))})"""


def _base_sql(by: str, params: dict, columns: str = "", newest: bool = False) -> str:
    """CTE `base`: the selected issues with repo, week and category (and `columns`). Only the filters in use
    are written, so DuckDB can push them into the scan; their values stay parameters ($...)."""
    category = f"p.{by}" if by == "component" else f"CASE WHEN p.abstained THEN '{UNSURE}' ELSE p.re_class END"
    where = _selection_where(params)
    if newest:
        where.append("i.created_at >= $first_week")
    return f"""
        base AS (
            SELECT i.repo, date_trunc('week', i.created_at)::DATE AS week,
                   CASE WHEN p.repo IS NULL THEN '{UNLABELED}' ELSE {category} END AS category{columns}
            FROM issues i
            LEFT JOIN predictions p
                   ON p.repo = i.repo AND p.number = i.number AND p.model_version = $model_version
            WHERE {" AND ".join(where)}
        )"""


def _used(sql: str, params: dict) -> dict:
    """The parameters a statement names (DuckDB rejects unused named parameters)."""
    return {k: v for k, v in params.items() if re.search(rf"\${k}\b", sql)}


def _pivot_sql(by: str, params: dict, categories: Sequence[str]) -> str:
    """Weeks x categories per section, with empty weeks as zeros; all counting in DuckDB."""
    return f"""
        WITH {_base_sql(by, params)},
        engine_map AS (SELECT unnest($map_repos) AS repo, unnest($map_ids) AS engine),
        counts AS (  -- aggregate per repo first, then map the few repos to sections
            SELECT CASE WHEN $per_engine THEN coalesce(m.engine, c.repo) ELSE '{ALL}' END AS grp,
                   c.week, c.category, sum(c.n) AS n
            FROM (SELECT repo, week, category, count(*) AS n FROM base GROUP BY ALL) c
            LEFT JOIN engine_map m ON m.repo = c.repo
            GROUP BY ALL),
        {_span_sql(params)},
        clamped AS (  -- since..until, cut to the weeks of the selected data (no empty weeks outside it)
            -- least()/greatest() skip NULL: without $hi/$lo the range is the data's own span
            SELECT CASE WHEN last IS NOT NULL THEN least($hi, last) END AS hi, greatest($lo, first) AS lo
            FROM span),
        bounds AS (
            SELECT hi,
                   -- without $n_weeks the range starts at lo; a `last_weeks` window starts BASELINE_WEEKS
                   -- early: those rows feed the last-week baseline
                   greatest(lo, hi - INTERVAL ($n_weeks - 1 + $baseline) WEEK)::DATE AS lo
            FROM clamped),
        spine AS (SELECT unnest(generate_series(lo, hi, INTERVAL 7 DAY))::DATE AS week FROM bounds),
        grps AS (SELECT DISTINCT grp FROM counts UNION SELECT unnest($groups)),
        grid AS (SELECT g.grp, s.week, k.category, k.n
                 FROM grps g CROSS JOIN spine s
                 LEFT JOIN counts k ON k.grp = g.grp AND k.week = s.week),
        wide AS (PIVOT grid ON category IN ({", ".join(_sql_literal(c) for c in categories)})
                 USING sum(n) GROUP BY grp, week)
        SELECT grp, week, coalesce(COLUMNS(* EXCLUDE (grp, week)), 0) FROM wide
        ORDER BY list_position($order, grp) NULLS LAST, grp, week"""


def _newest_sql(by: str, params: dict, keys: str) -> str:
    """Per `keys` (the section and category, or also the week): how many selected issues of the wanted
    categories were created from $first_week, and the $limit newest of them — a top-N aggregate (max_by with
    N), which needs no sort of all the rows."""
    return f"""
        WITH {_base_sql(by, params, ", i.number, i.title, i.html_url, i.created_at, p.confidence", newest=True)},
        engine_map AS (SELECT unnest($map_repos) AS repo, unnest($map_ids) AS engine),
        tagged AS (
            SELECT CASE WHEN $per_engine THEN coalesce(m.engine, b.repo) ELSE '{ALL}' END AS grp, b.*
            FROM base b LEFT JOIN engine_map m ON m.repo = b.repo
            WHERE list_contains($wanted, category)),
        top AS (
            SELECT {keys}, count(*) AS n,
                   max_by({{'repo': repo, 'number': number, 'title': title, 'html_url': html_url,
                            'created_at': created_at, 'confidence': confidence}}, created_at, $limit) AS issues
            FROM tagged GROUP BY ALL)"""
