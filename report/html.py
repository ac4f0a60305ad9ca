"""The HTML report: one self-contained page (the Vega bundle inlined, opens offline) with the weekly chart, the
tables of every section and links to the issues.

Each resource-class (or component) cell with issues links to the list of that week's issues of that class
further down the page; each list shows the newest `cell_limit` issues, linked to GitHub (html_url), and the
`retriage list` command that gives the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from html import escape

from retriage.core.refs import format_ref
from retriage.report import palette
from retriage.report.chart import weekly_chart
from retriage.report.weekly import (BASELINE_WEEKS, NewestIssue, Section, WeeklyReport, _issue, _newest_sql, _params,
                                    _used, newest_categories, resolve_engines)

_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 1.5em 2em; color: #222; }
h1 { font-size: 1.4em; margin-bottom: 0.2em; } h2 { font-size: 1.15em; margin-top: 2em; }
h3 { font-size: 1em; margin: 1.2em 0 0.3em; } p.meta { color: #666; margin-top: 0; }
table.weekly { border-collapse: collapse; font-variant-numeric: tabular-nums; margin: 0.5em 0; }
table.weekly th, table.weekly td { padding: 2px 9px; text-align: right; border-bottom: 1px solid #eee; }
table.weekly th:first-child, table.weekly td:first-child { text-align: left; white-space: nowrap; }
table.weekly tr.partial td { color: #999; font-style: italic; }
table.weekly tr.total td { font-weight: bold; border-top: 1px solid #999; }
table.weekly td .share { color: #999; font-size: 0.85em; margin-left: 3px; }
table.weekly a { text-decoration: none; } table.weekly a:hover { text-decoration: underline; }
span.swatch { display: inline-block; width: 0.8em; height: 0.8em; margin-right: 4px; vertical-align: -1px; }
ul.issues { margin: 0.2em 0 0.6em; padding-left: 1.4em; } ul.issues li { margin: 1px 0; }
.dim { color: #888; } code { background: #f4f4f4; padding: 0 3px; }
"""


@dataclass(frozen=True)
class CellIssues:
    """The newest issues of one section, week and category (what a report cell counts), and how many there are."""

    issues: list[NewestIssue]
    total: int


def cell_issues(con, report: WeeklyReport,
                limit: int = 10) -> dict[tuple[str, date, str], CellIssues]:
    """(section, week, category) -> the `limit` newest issues of that cell, for the resource classes (or every
    component) in the weeks the report shows. For the HTML report's links; one window query."""
    if not report.sections or not report.weeks or not (wanted := newest_categories(report.by, report.categories)):
        return {}
    params = _params(resolve_engines(report.engines), report.per_engine, report.model_version, report.include_prs,
                     report.since, report.until)
    sql = _newest_sql(report.by, params, "grp, week, category") + """
        SELECT grp, week, category, n, issues FROM top ORDER BY grp, week, list_position($wanted, category)"""
    first = datetime.combine(report.weeks[0], datetime.min.time())
    rows = con.execute(sql, _used(sql, {**params, "first_week": first, "wanted": wanted, "limit": limit})).fetchall()
    return {(grp, week, category): CellIssues([_issue(category, **x) for x in issues], int(n))
            for grp, week, category, n, issues in rows}


def _swatch(category: str) -> str:
    return f'<span class="swatch" style="background:{palette.color(category)}"></span>'


def _anchor(section: Section, week, category: str) -> str:
    return f"{section.engine}-{week.isoformat()}-{category}".replace(".", "_").replace("/", "_")


def _issue_li(n: NewestIssue, with_category: bool = False) -> str:
    ref = escape(format_ref(n.repo, n.number))
    title = escape(n.title)
    link = f'<a href="{escape(n.html_url)}">{ref}</a>' if n.html_url else ref
    conf = f' <span class="dim">({n.confidence:.2f})</span>' if n.confidence is not None else ""
    cat = f"{_swatch(n.category)}<b>{escape(n.category)}</b> " if with_category else ""
    return f'<li>{cat}{link} <span class="dim">{n.created_at:%Y-%m-%d}</span> {title}{conf}</li>'


def _list_command(report: WeeklyReport, section: Section, week, category: str) -> str:
    engine = f" --engine {section.engine}" if section.engine != "all" else "".join(
        f" --engine {e}" for e in report.engines)
    option = "--class" if report.by == "re_class" else "--component"
    return (f"retriage list {option} {category}{engine} --since {week.isoformat()} "
            f"--until {(week + timedelta(days=6)).isoformat()} --limit 1000")


def _table(report: WeeklyReport, section: Section, cells: dict) -> str:
    linked = set(newest_categories(report.by, report.categories))
    head = "".join(f"<th>{_swatch(c)}{escape(c)}</th>" for c in report.categories)
    rows = []
    for w in section.weeks:
        tds = []
        for c, n in w.counts.items():
            text = f'{n}<span class="share">{w.share(c):.0%}</span>' if n else '<span class="dim">0</span>'
            if n and c in linked and (section.engine, w.week, c) in cells:
                text = f'<a href="#{_anchor(section, w.week, c)}">{text}</a>'
            tds.append(f"<td>{text}</td>")
        label = f"{w.week.isoformat()} (partial, {w.days} d)" if w.partial else w.week.isoformat()
        rows.append(f'<tr class="{"partial" if w.partial else ""}"><td>{label}</td><td>{w.total}</td>'
                    f'{"".join(tds)}</tr>')
    t = section.totals
    rows.append(f'<tr class="total"><td>total</td><td>{t.total}</td>'
                + "".join(f'<td>{n}<span class="share">{t.share(c):.0%}</span></td>' for c, n in t.counts.items())
                + "</tr>")
    ch = section.change
    if ch is not None and ch.baseline_weeks:
        rows.append(f"<tr><td>{ch.baseline_weeks}-wk mean</td><td>{ch.baseline_total:.1f}</td>"
                    + "".join(f"<td>{ch.baseline[c]:.1f}</td>" for c in report.categories) + "</tr>")
        rows.append(f"<tr><td>Δ last full week ({ch.week.isoformat()})</td><td>{ch.delta():+.1f}</td>"
                    + "".join(f"<td>{ch.delta(c):+.1f}</td>" for c in report.categories) + "</tr>")
    return (f'<table class="weekly"><thead><tr><th>week (Mon)</th><th>issues</th>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def _cell_lists(report: WeeklyReport, section: Section, cells: dict) -> str:
    out = []
    for w in reversed(section.weeks):  # newest week first
        items = []
        for c in newest_categories(report.by, report.categories):
            cell: CellIssues | None = cells.get((section.engine, w.week, c))
            if cell is None:
                continue
            more = cell.total - len(cell.issues)
            rest = (f'<li class="dim">… and {more} more: <code>{escape(_list_command(report, section, w.week, c))}'
                    "</code></li>") if more > 0 else ""
            items.append(f'<h4 id="{_anchor(section, w.week, c)}">{_swatch(c)}{escape(c)} · {cell.total} '
                         f'issue{"s" if cell.total != 1 else ""}</h4><ul class="issues">'
                         + "".join(_issue_li(n) for n in cell.issues) + rest + "</ul>")
        if items:
            partial = f" (partial, {w.days} d)" if w.partial else ""
            out.append(f"<h3>Week of {w.week.isoformat()}{partial}</h3>" + "".join(items))
    return "".join(out)


def report_html(report: WeeklyReport, cells: dict, chart_html: str | None = None) -> str:
    """The page. `cells` from report.weekly.cell_issues; `chart_html` the inline Vega page of the chart
    (default: rendered here)."""
    page = chart_html if chart_html is not None else weekly_chart(report).to_html(inline=True)
    what = "RE classes" if report.by == "re_class" else "components"
    scope = ", ".join(report.engines) or "every engine"
    meta = (f"{report.first_week} – {report.last_week} · {scope} · model {escape(str(report.model_version))} · "
            f"{report.issues} issues, {report.labeled} labeled"
            + (f" · data as of {report.as_of:%Y-%m-%d %H:%M} UTC" if report.as_of else "")
            + ("" if report.include_prs else " · pull requests excluded"))
    notes = (f"<p class='dim'>Δ last full week = that week minus the mean of the (up to) {BASELINE_WEEKS} full "
             "weeks before it; partial weeks (fewer than 7 days of data, shown in grey) are not compared. "
             "A linked cell opens the list of its issues.</p>")
    body = [f"<h1>Issues per week by {what}</h1><p class='meta'>{meta}</p>"]
    tail = [notes]
    for s in report.sections:
        tail.append(f"<h2>{escape(s.name)}</h2>{_table(report, s, cells)}")
        if s.newest:
            tail.append("<h3>Newest issues of each "
                        f"{'resource class' if report.by == 're_class' else 'component'}</h3><ul class='issues'>"
                        + "".join(_issue_li(n, with_category=True) for n in s.newest) + "</ul>")
        lists = _cell_lists(report, s, cells)
        if lists:
            tail.append(f"<details open><summary>Issues behind each cell · {escape(s.name)}</summary>{lists}"
                        "</details>")
    title = f"retriage · issues per week by {what}"
    page = page.replace("<head>", f"<head>\n  <title>{escape(title)}</title>\n  <style>{_CSS}</style>", 1)
    page = page.replace("<body>", "<body>\n" + "".join(body), 1)
    i = page.rindex("</body>")
    return page[:i] + "\n".join(tail) + "\n" + page[i:]
