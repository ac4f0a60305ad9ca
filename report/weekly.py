"""The weekly distribution of RE classes (or components) over ISO weeks of issue creation, counted in DuckDB.

The counting rules (weeks, range, partial weeks, which label counts, columns, the last-week change, the newest
issues) are the documented contract in report/README.md. The SQL is built in report.query: a GROUP BY over
the issues joined to their predictions, a generate_series week spine PIVOTed into columns, and a top-N aggregate
for the newest issues; Python only arranges the aggregated rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Iterable, Sequence

import duckdb

from retriage import taxonomy
from retriage.core.errors import UsageError
from retriage.report.query import (ALL, MAX_WEEKS, UNLABELED, UNSURE, _base_sql, _check_options,  # noqa: F401
                                   _newest_sql, _pivot_sql, _selection_where, _used, resolve_engines)

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
    days: int = 7  # days of the week the data covers (inside since/until and up to the data's as-of day)

    @property
    def partial(self) -> bool:
        """Fewer than 7 days counted: cut by --since/--until, or the data ends inside this week."""
        return self.days < 7

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
    excluded: tuple[date, ...] = ()  # partial weeks after `week`, left out of the comparison

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
        """The last full week shown against the mean of the (up to BASELINE_WEEKS) full weeks before it; partial
        weeks (the data's last week, a week cut by since/until) are never compared. None without a full week."""
        rows = self.earlier + self.weeks
        idx = next((i for i in range(len(rows) - 1, len(self.earlier) - 1, -1) if not rows[i].partial), None)
        if idx is None:
            return None
        last = rows[idx]
        before = [w for w in rows[:idx] if not w.partial][-BASELINE_WEEKS:]
        baseline = {c: (sum(w.counts[c] for w in before) / len(before) if before else 0.0) for c in last.counts}
        return Change(last.week, dict(last.counts), len(before), baseline, tuple(w.week for w in rows[idx + 1:]))


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
    as_of: datetime | None = None  # the newest moment the data covers (newest issue, or last sync)
    sample: str | None = None  # sample_note(): what tables and charts say when the data is a sample

    @property
    def partial_weeks(self) -> list[date]:
        return [w.week for w in self.sections[0].weeks if w.partial] if self.sections else []

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


def _extra_categories(con: duckdb.DuckDBPyConnection, by: str, model_version: str | None,
                      known: Sequence[str]) -> list[str]:
    """Values the model's predictions hold that the taxonomy does not list (e.g. from an older taxonomy)."""
    if model_version is None:
        return []
    rows = con.execute(f"SELECT DISTINCT {by} FROM predictions WHERE model_version = ? "
                       f"AND NOT list_contains(?, {by}) ORDER BY 1", [model_version, list(known)]).fetchall()
    return [r[0] for r in rows if r[0] not in (UNSURE, UNLABELED)]


def _categories(con: duckdb.DuckDBPyConnection, by: str, model_version: str | None) -> tuple[list[str], list[str]]:
    """(the taxonomy's categories, every column of the report: those, other stored values, unsure, unlabeled)."""
    known = taxonomy.re_class_ids() if by == "re_class" else taxonomy.component_ids()
    categories = known + _extra_categories(con, by, model_version, known)
    if by == "re_class":
        categories.append(UNSURE)
    categories.append(UNLABELED)
    return known, categories


def _days(monday: date, since: date | None, until: date | None, as_of: date | None) -> int:
    """Days of the week starting `monday` inside since..until and up to the as-of day (0 to 7)."""
    first = max(monday, since) if since else monday
    last = min(d for d in (monday + timedelta(days=6), until, as_of) if d is not None)
    return max(0, min(7, (last - first).days + 1))


def _sections(rows, categories: Sequence[str], last_weeks: int | None, since: date | None, until: date | None,
              as_of: date | None) -> list[Section]:
    names = {e.id: e.name for e in taxonomy.engines()} | {ALL: "all engines"}
    sections: list[Section] = []
    for grp, week, *values in rows:
        if not sections or sections[-1].engine != grp:
            sections.append(Section(grp, names.get(grp, grp), []))
        sections[-1].weeks.append(Week(dict(zip(categories, (int(v) for v in values))), week=week,
                                       days=_days(week, since, until, as_of)))
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
        s.weeks, s.earlier = ([Week({c: w.counts[c] for c in categories}, week=w.week, days=w.days) for w in ws]
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
    params = _params(selected, per_engine, model_version, include_prs, since_day, until_day)
    monday = (lambda d: d - timedelta(days=d.weekday()))
    _check_span(con, params, since_day, until_day, last_weeks)
    pivot = _pivot_sql(by, params, categories)
    rows = con.execute(pivot, _used(pivot, {
        **params,
        "lo": monday(since_day) if since_day else None,
        "hi": monday(until_day) if until_day else None,
        "n_weeks": last_weeks,
        "baseline": BASELINE_WEEKS + 1,  # one more: a partial last week is not compared
        "groups": [ALL] if not per_engine else [e.id for e in selected],
        "order": [ALL] + [e.id for e in all_engines],
    })).fetchall()
    as_of = data_as_of(con)
    sections = _sections(rows, categories, last_weeks, since_day, until_day, as_of.date() if as_of else None)
    categories = _drop_empty_extras(sections, categories, known)
    if sections and newest > 0:
        _attach_newest(con, sections, by, categories, params, newest)
    return WeeklyReport(by, categories, model_version, [e.id for e in selected], per_engine, since_day,
                        until_day, include_prs, sections, as_of, sample_note(con))


MAX_SPAN_WEEKS = 5_218  # about a century of rows: a selection spanning more is refused unless --weeks cuts it


def _check_span(con, params: dict, since_day: date | None, until_day: date | None, last_weeks: int | None) -> None:
    """Rows are dense (every week of the range), so a handful of issues centuries apart would make hundreds of
    thousands of rows: the cost must follow the input, so such a range is refused in one line instead."""
    if last_weeks is not None and last_weeks <= MAX_SPAN_WEEKS:
        return
    where = _selection_where(params)
    sql = f"SELECT min(i.created_at)::DATE, max(i.created_at)::DATE FROM issues i WHERE {' AND '.join(where)}"
    first, last = con.execute(sql, _used(sql, params)).fetchone()
    if first is None:
        return
    weeks = (last - first).days // 7 + 1
    if weeks > MAX_SPAN_WEEKS:
        raise UsageError(f"the selected issues span {weeks:,} weeks ({first} to {last}): give --since/--until or "
                         f"--weeks N to show at most {MAX_SPAN_WEEKS:,} weeks")


def _params(selected: Sequence[taxonomy.Engine], per_engine: bool, model_version: str | None, include_prs: bool,
            since_day: date | None, until_day: date | None) -> dict:
    """The statement parameters every query of the report shares (selection, label source, day bounds)."""
    all_engines = taxonomy.engines()
    return {
        "map_repos": [r for e in all_engines for r in (e.repo, *e.former_repos)],
        "map_ids": [e.id for e in all_engines for _ in (e.repo, *e.former_repos)],
        "per_engine": per_engine,
        "model_version": model_version,
        "include_prs": include_prs,
        "repos": [r for e in selected for r in (e.repo, *e.former_repos)] or None,
        "since": datetime.combine(since_day, datetime.min.time()) if since_day else None,
        "until": datetime.combine(until_day + timedelta(days=1), datetime.min.time()) if until_day else None,
    }


def data_as_of(con: duckdb.DuckDBPyConnection) -> datetime | None:
    """The newest moment the database covers: its newest issue or PR, or the last sync run if later.

    The week holding it is partial (its later days are not mined yet), as is any week after it."""
    return con.execute("SELECT greatest((SELECT max(created_at) FROM issues), "
                       "(SELECT max(last_run_at) FROM sync_state))").fetchone()[0]


SAMPLE_COVERAGE = 0.25  # a tracker numbers issues and PRs together: a whole one holds far more of its numbers


def sample_note(con: duckdb.DuckDBPyConnection) -> str | None:
    """"sample data ..." when the database is a sample, such as the bundled snapshot: nothing was mined
    (sync_state is empty) and its issues hold under SAMPLE_COVERAGE of the numbers from each repository's first
    to its last; None otherwise."""
    if con.execute("SELECT count(*) FROM sync_state").fetchone()[0]:
        return None
    held, span = con.execute("SELECT sum(n), sum(span) FROM (SELECT count(*) AS n, max(number) - min(number) + 1 "
                             "AS span FROM issues GROUP BY repo)").fetchone()
    if not held or held >= SAMPLE_COVERAGE * span:
        return None
    return f"sample data ({held:,} of {span:,} issue numbers, imported, not mined)"


def newest_categories(by: str, categories: Sequence[str]) -> list[str]:
    """Categories whose newest issues are listed: the resource classes (not `none`), or every component."""
    skip = {UNLABELED, UNSURE}
    if by == "re_class":
        skip |= set(taxonomy.re_class_ids()) - set(taxonomy.resource_class_ids())
    return [c for c in categories if c not in skip]


def _issue(category, repo, number, title, html_url, created_at, confidence) -> NewestIssue:
    return NewestIssue(category, repo, number, title or "", html_url or "", created_at, confidence)


NEWEST_WEEKS = (1, 4)  # the newest issues are looked for in the last week, the last 4, then all weeks shown


def _attach_newest(con, sections: list[Section], by: str, categories: Sequence[str], params: dict,
                   limit: int) -> None:
    """The `limit` newest issues of each listed category created in the weeks shown, per section.

    First over the last week, where the time filter leaves few rows to join; the categories with fewer than
    `limit` there (in some section) are looked up again over the last NEWEST_WEEKS[1] weeks, then every week
    shown."""
    wanted = newest_categories(by, categories)
    if not wanted:
        return
    sql = _newest_sql(by, params, "grp, category") + """
        SELECT grp, category, n, issues FROM top ORDER BY grp, list_position($wanted, category)"""
    shown, last = sections[0].weeks[0].week, sections[0].weeks[-1].week
    windows = [max(shown, last - timedelta(weeks=n - 1)) for n in NEWEST_WEEKS] + [shown]
    found: dict[tuple[str, str], list] = {}
    for first in dict.fromkeys(windows):
        short = [c for c in wanted if any(len(found.get((s.engine, c), [])) < limit for s in sections)]
        if not short:
            break
        rows = con.execute(sql, _used(sql, {**params, "first_week": datetime.combine(first, datetime.min.time()),
                                            "wanted": short, "limit": limit})).fetchall()
        for grp, category, n, issues in rows:
            if len(found.get((grp, category), [])) < limit:
                found[(grp, category)] = issues
    by_grp = {s.engine: s for s in sections}
    for (grp, category), issues in sorted(found.items(), key=lambda kv: wanted.index(kv[0][1])):
        if grp in by_grp:
            by_grp[grp].newest += [_issue(category, **x) for x in issues]
