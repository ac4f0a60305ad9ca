"""The weekly distribution of RE classes (or components) over issue creation weeks, computed in DuckDB.

Counting rules (the report's documented contract):

- Weeks are ISO weeks, Monday to Sunday, of `issues.created_at` (stored in UTC). A row is keyed by its Monday.
  The rows are dense: every week from the first to the last week of the range is present, with zeros when no
  issue was created in it.
- The range is `since`..`until`, both inclusive, whole days (UTC). Without `since` it starts at the week of the
  oldest issue in the selection, without `until` it ends at the week of the newest one. The first and last
  rows count only the days inside the bounds, so they may cover part of a week. `last_weeks=N` shows the last
  N weeks of that range.
- Pull requests are left out unless `include_prs`.
- Which label counts: the prediction of one model version, by default the shipped model's
  (`retriage.classifier.current_model_version()`). An issue without a prediction of that version, or every
  issue when no model is shipped, counts as `unlabeled`. With `by="re_class"` a prediction with
  `abstained = true` counts as `unsure` (that column appears only when there are any); with `by="component"`
  the predicted component counts as is (abstaining is about the class).
- Columns follow the taxonomy's order (taxonomy/taxonomy.toml), then any other value the predictions hold,
  then `unsure`, then `unlabeled`.
- Engines come from taxonomy/engines.toml. All issues count together unless `per_engine`, which gives one
  section per engine (issues of repositories the taxonomy does not know form a section named by the repo).
- Each section ends with totals (of the weeks shown), the last week against the mean of the four weeks
  before it (fewer when the range starts later; with `last_weeks` the baseline may reach before the weeks
  shown, never before `since`), and the newest issues of each class (or component) created in the last week.

The heavy work is three SQL statements: a GROUP BY over the issues joined to their predictions, a
generate_series week spine crossed with the sections and PIVOTed into columns, and a window query for the
newest issues of the last week. Python only arranges the aggregated rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Iterable, Sequence

import duckdb

from retriage import taxonomy
from retriage.core.days import check_year
from retriage.core.errors import UserError

MAX_WEEKS = 52 * 1000

BY_VALUES = ("re_class", "component")
UNLABELED = "unlabeled"
UNSURE = "unsure"
ALL = "all"
BASELINE_WEEKS = 4
CURRENT_MODEL = object()  # model_version default: the shipped model


@dataclass(frozen=True)
class Counts:
    """Issue counts per category for one week (or a total), in the report's column order."""

    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def share(self, category: str) -> float:
        total = self.total
        return self.counts.get(category, 0) / total if total else 0.0

    @property
    def shares(self) -> dict[str, float]:
        return {c: self.share(c) for c in self.counts}


@dataclass(frozen=True)
class Week(Counts):
    week: date = date.min  # the Monday

    @property
    def iso_week(self) -> str:
        y, w, _ = self.week.isocalendar()
        return f"{y}-W{w:02d}"


@dataclass(frozen=True)
class Change:
    """The last week against the mean of the weeks before it (up to BASELINE_WEEKS)."""

    week: date
    counts: dict[str, int]
    baseline_weeks: int
    baseline: dict[str, float]  # mean per category over the baseline weeks

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def baseline_total(self) -> float:
        return sum(self.baseline.values())

    def delta(self, category: str | None = None) -> float | None:
        """Last week minus the baseline mean (None without baseline weeks); category None = all issues."""
        if not self.baseline_weeks:
            return None
        if category is None:
            return self.total - self.baseline_total
        return self.counts[category] - self.baseline[category]

    def ratio(self, category: str | None = None) -> float | None:
        """delta / baseline mean, or None when the mean is 0 or there is no baseline."""
        mean = self.baseline_total if category is None else self.baseline.get(category, 0.0)
        d = self.delta(category)
        return d / mean if d is not None and mean else None


@dataclass(frozen=True)
class NewestIssue:
    category: str
    repo: str
    number: int
    title: str
    html_url: str
    created_at: datetime
    confidence: float | None


@dataclass
class Section:
    """One engine (or `all`): the week rows, totals, last-week change and newest issues."""

    engine: str  # engine id, a repo the taxonomy does not know, or "all"
    name: str  # display name
    weeks: list[Week]
    newest: list[NewestIssue] = field(default_factory=list)
    earlier: list[Week] = field(default_factory=list)  # weeks before a `last_weeks` window, for the baseline only

    @property
    def totals(self) -> Counts:
        cats = self.weeks[0].counts.keys() if self.weeks else ()
        return Counts({c: sum(w.counts[c] for w in self.weeks) for c in cats})

    @property
    def change(self) -> Change | None:
        if not self.weeks:
            return None
        last = self.weeks[-1]
        before = (self.earlier + self.weeks)[-1 - BASELINE_WEEKS:-1]
        baseline = {c: (sum(w.counts[c] for w in before) / len(before) if before else 0.0) for c in last.counts}
        return Change(last.week, dict(last.counts), len(before), baseline)


@dataclass
class WeeklyReport:
    by: str  # re_class | component
    categories: list[str]  # column order
    model_version: str | None
    engines: list[str]  # engine ids selected; empty = every issue in the database
    per_engine: bool
    since: date | None
    until: date | None
    include_prs: bool
    sections: list[Section]

    @property
    def weeks(self) -> list[date]:
        return [w.week for w in self.sections[0].weeks] if self.sections else []

    @property
    def first_week(self) -> date | None:
        return self.weeks[0] if self.weeks else None

    @property
    def last_week(self) -> date | None:
        return self.weeks[-1] if self.weeks else None

    @property
    def issues(self) -> int:
        return sum(s.totals.total for s in self.sections)

    @property
    def labeled(self) -> int:
        """Issues with a prediction of the model version (unsure ones included)."""
        return self.issues - sum(s.totals.counts.get(UNLABELED, 0) for s in self.sections)

    def category_names(self) -> dict[str, str]:
        """Category id -> a human name from the taxonomy ('' where there is none)."""
        names = {t.id: t.name for t in taxonomy.re_classes()} if self.by == "re_class" else {}
        names.update({UNSURE: "classifier abstained", UNLABELED: "no prediction of this model"})
        return {c: names.get(c, "") for c in self.categories}


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
                raise UserError(f"unknown engine {name!r}: use one of {known}")
            if engine not in out:
                out.append(engine)
    return out


def _sql_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _base_sql(by: str, params: dict, columns: str = "", newest: bool = False) -> str:
    """CTE `base`: the selected issues with repo, week and category (and `columns`). Only the filters in use
    are written, so DuckDB can push them into the scan; their values stay parameters ($...)."""
    category = f"p.{by}" if by == "component" else f"CASE WHEN p.abstained THEN '{UNSURE}' ELSE p.re_class END"
    where = ["i.created_at IS NOT NULL"]
    if not params["include_prs"]:
        where.append("NOT i.is_pull_request")
    if params["repos"] is not None:
        where.append("list_contains($repos, i.repo)")
    if params["since"] is not None:
        where.append("i.created_at >= $since")
    if params["until"] is not None:
        where.append("i.created_at < $until")
    if newest:
        where.append("i.created_at >= $last_week AND i.created_at < $last_week + INTERVAL 7 DAY")
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


def _extra_categories(con: duckdb.DuckDBPyConnection, by: str, model_version: str | None,
                      known: Sequence[str]) -> list[str]:
    """Values the model's predictions hold that the taxonomy does not list (e.g. from an older taxonomy)."""
    if model_version is None:
        return []
    rows = con.execute(f"SELECT DISTINCT {by} FROM predictions WHERE model_version = ? "
                       f"AND NOT list_contains(?, {by}) ORDER BY 1", [model_version, list(known)]).fetchall()
    return [r[0] for r in rows if r[0] not in (UNSURE, UNLABELED)]


def _parse_day(value: date | str | None, what: str) -> date | None:
    if value is None:
        return value
    if isinstance(value, datetime):
        value = value.date()
    if not isinstance(value, date):
        try:
            if len(value) != 10:
                raise ValueError
            value = date.fromisoformat(value)
        except ValueError:
            raise UserError(f"{what} must be a date as YYYY-MM-DD, not {value!r}") from None
    return check_year(value, what, value.isoformat())


def _check_options(by: str, since, until, last_weeks: int | None) -> tuple[date | None, date | None]:
    """The inclusive day range, after checking every option that can be wrong."""
    if by not in BY_VALUES:
        raise UserError(f"--by must be one of {', '.join(BY_VALUES)}, not {by!r}")
    since_day, until_day = _parse_day(since, "--since"), _parse_day(until, "--until")
    if since_day and until_day and since_day > until_day:
        raise UserError(f"--since {since_day} is after --until {until_day}")
    if last_weeks is not None and not 1 <= last_weeks <= MAX_WEEKS:
        raise UserError(f"the number of weeks must be from 1 to {MAX_WEEKS:,}, not {last_weeks}")
    return since_day, until_day


def _categories(con: duckdb.DuckDBPyConnection, by: str, model_version: str | None) -> tuple[list[str], list[str]]:
    """(the taxonomy's categories, every column of the report: those, other stored values, unsure, unlabeled)."""
    known = taxonomy.re_class_ids() if by == "re_class" else taxonomy.component_ids()
    categories = known + _extra_categories(con, by, model_version, known)
    if by == "re_class":
        categories.append(UNSURE)
    categories.append(UNLABELED)
    return known, categories


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
        bounds AS (
            SELECT coalesce($hi, max(week)) AS hi,
                   -- greatest() skips NULL: without $n_weeks the range starts at $lo or the first week
                   -- a `last_weeks` window starts BASELINE_WEEKS early: those rows feed the last-week baseline
                   greatest(coalesce($lo, min(week)),
                            coalesce($hi, max(week)) - INTERVAL ($n_weeks - 1 + $baseline) WEEK)::DATE
                       AS lo
            FROM counts),
        spine AS (SELECT unnest(generate_series(lo, hi, INTERVAL 7 DAY))::DATE AS week FROM bounds),
        grps AS (SELECT DISTINCT grp FROM counts UNION SELECT unnest($groups)),
        grid AS (SELECT g.grp, s.week, k.category, k.n
                 FROM grps g CROSS JOIN spine s
                 LEFT JOIN counts k ON k.grp = g.grp AND k.week = s.week),
        wide AS (PIVOT grid ON category IN ({", ".join(_sql_literal(c) for c in categories)})
                 USING sum(n) GROUP BY grp, week)
        SELECT grp, week, coalesce(COLUMNS(* EXCLUDE (grp, week)), 0) FROM wide
        ORDER BY list_position($order, grp) NULLS LAST, grp, week"""


def _sections(rows, categories: Sequence[str], last_weeks: int | None) -> list[Section]:
    names = {e.id: e.name for e in taxonomy.engines()} | {ALL: "all engines"}
    sections: list[Section] = []
    for grp, week, *values in rows:
        if not sections or sections[-1].engine != grp:
            sections.append(Section(grp, names.get(grp, grp), []))
        sections[-1].weeks.append(Week(dict(zip(categories, (int(v) for v in values))), week=week))
    if last_weeks is not None:
        for s in sections:
            s.earlier, s.weeks = s.weeks[:-last_weeks], s.weeks[-last_weeks:]
    return sections


def _drop_empty_extras(sections: list[Section], categories: list[str], known: list[str]) -> list[str]:
    """Leave out `unsure` and values outside the taxonomy when no week counts any; returns the categories kept."""
    hidden = [c for c in categories if c == UNSURE or c not in known and c != UNLABELED]
    empty = {c for c in hidden if not any(w.counts[c] for s in sections for w in s.weeks)}
    if not empty:
        return categories
    categories = [c for c in categories if c not in empty]
    for s in sections:
        s.weeks, s.earlier = ([Week({c: w.counts[c] for c in categories}, week=w.week) for w in ws]
                              for ws in (s.weeks, s.earlier))
    return categories


def weekly_report(con: duckdb.DuckDBPyConnection, engines: Iterable[str] | None = None,
                  since: date | str | None = None, until: date | str | None = None, by: str = "re_class",
                  include_prs: bool = False, model_version=CURRENT_MODEL, per_engine: bool = False,
                  last_weeks: int | None = None, newest: int = 3) -> WeeklyReport:
    """The weekly distribution (see the module docstring for the counting rules).

    engines: engine ids or aliases from taxonomy/engines.toml; None or empty = every issue in the database.
    since/until: inclusive days (date or 'YYYY-MM-DD'). model_version: whose predictions count (default the
    shipped model; None = none, everything unlabeled). per_engine: one section per engine instead of one for
    all. last_weeks: keep only the last N weeks of the range. newest: issues listed per category.
    """
    since_day, until_day = _check_options(by, since, until, last_weeks)
    if model_version is CURRENT_MODEL:
        from retriage.classifier import current_model_version

        model_version = current_model_version()
    selected = resolve_engines(engines)
    all_engines = taxonomy.engines()
    known, categories = _categories(con, by, model_version)
    params = {
        "map_repos": [r for e in all_engines for r in (e.repo, *e.former_repos)],
        "map_ids": [e.id for e in all_engines for _ in (e.repo, *e.former_repos)],
        "per_engine": per_engine,
        "model_version": model_version,
        "include_prs": include_prs,
        "repos": [r for e in selected for r in (e.repo, *e.former_repos)] or None,
        "since": datetime.combine(since_day, datetime.min.time()) if since_day else None,
        "until": datetime.combine(until_day + timedelta(days=1), datetime.min.time()) if until_day else None,
    }
    monday = (lambda d: d - timedelta(days=d.weekday()))
    pivot = _pivot_sql(by, params, categories)
    rows = con.execute(pivot, _used(pivot, {
        **params,
        "lo": monday(since_day) if since_day else None,
        "hi": monday(until_day) if until_day else None,
        "n_weeks": last_weeks,
        "baseline": BASELINE_WEEKS,
        "groups": [ALL] if not per_engine else [e.id for e in selected],
        "order": [ALL] + [e.id for e in all_engines],
    })).fetchall()
    sections = _sections(rows, categories, last_weeks)
    categories = _drop_empty_extras(sections, categories, known)
    if sections and newest > 0:
        _attach_newest(con, sections, by, categories, params, newest)
    return WeeklyReport(by, categories, model_version, [e.id for e in selected], per_engine, since_day,
                        until_day, include_prs, sections)


def newest_categories(by: str, categories: Sequence[str]) -> list[str]:
    """Categories whose newest issues are listed: the resource classes (not `none`), or every component."""
    skip = {UNLABELED, UNSURE}
    if by == "re_class":
        skip |= set(taxonomy.re_class_ids()) - set(taxonomy.resource_class_ids())
    return [c for c in categories if c not in skip]


def _attach_newest(con, sections: list[Section], by: str, categories: Sequence[str], params: dict,
                   limit: int) -> None:
    wanted = newest_categories(by, categories)
    if not wanted:
        return
    last = sections[0].weeks[-1].week
    sql = f"""
        WITH {_base_sql(by, params, ", i.number, i.title, i.html_url, i.created_at, p.confidence", newest=True)},
        engine_map AS (SELECT unnest($map_repos) AS repo, unnest($map_ids) AS engine),
        ranked AS (
            SELECT CASE WHEN $per_engine THEN coalesce(m.engine, b.repo) ELSE '{ALL}' END AS grp, b.*,
                   row_number() OVER (PARTITION BY grp, category ORDER BY created_at DESC, b.repo, number DESC) AS rk
            FROM base b LEFT JOIN engine_map m ON m.repo = b.repo
            WHERE list_contains($wanted, category))
        SELECT grp, category, repo, number, title, html_url, created_at, confidence FROM ranked
        WHERE rk <= $limit
        ORDER BY grp, list_position($wanted, category), rk"""
    rows = con.execute(sql, _used(sql, {**params, "last_week": datetime.combine(last, datetime.min.time()),
                                         "wanted": wanted, "limit": limit})).fetchall()
    by_grp = {s.engine: s for s in sections}
    for grp, category, repo, number, title, url, created, conf in rows:
        if grp in by_grp:
            by_grp[grp].newest.append(NewestIssue(category, repo, number, title or "", url or "", created, conf))
