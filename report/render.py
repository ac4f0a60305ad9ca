"""Output formats of the weekly report: Rich tables, CSV and JSON (charts: report.chart, HTML: report.html).

The JSON and CSV layouts are a public interface, documented in report/README.md; a change of the JSON layout
raises SCHEMA_VERSION.
"""

from __future__ import annotations

import csv
import io
from datetime import timedelta

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from retriage.core.output import dumps
from retriage.core.refs import format_ref
from retriage.report.components import ComponentReport
from retriage.report.weekly import (BASELINE_WEEKS, UNLABELED, UNSURE, Change, Counts, Section, Week, WeeklyReport,
                                    newest_categories)

SCHEMA_VERSION = 2  # 2: weeks carry days/partial, the change skips partial weeks, as_of and partial_weeks
DEFAULT_WEEKS = 12  # the last weeks shown without --since, --weeks or --all


# ---------------------------------------------------------------------------------------------------- JSON / CSV

def _r(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else round(x, digits)


def _counts_dict(c: Counts) -> dict:
    return {"total": c.total, "counts": dict(c.counts), "shares": {k: _r(v) for k, v in c.shares.items()}}


def _change_dict(ch: Change | None) -> dict | None:
    if ch is None:
        return None
    cats = list(ch.counts)
    return {
        "week": ch.week.isoformat(),  # the last full week
        "excluded_partial_weeks": [w.isoformat() for w in ch.excluded],
        "total": ch.total,
        "counts": dict(ch.counts),
        "baseline_weeks": ch.baseline_weeks,
        "baseline_mean": {"total": _r(ch.baseline_total), "counts": {c: _r(ch.baseline[c]) for c in cats}},
        "change": {"total": _r(ch.delta()), "counts": {c: _r(ch.delta(c)) for c in cats}},
        "change_ratio": {"total": _r(ch.ratio()), "counts": {c: _r(ch.ratio(c)) for c in cats}},
    }


def _section_dict(s: Section) -> dict:
    return {
        "engine": s.engine,
        "name": s.name,
        "weeks": [{"week": w.week.isoformat(), "iso_week": w.iso_week, "days": w.days, "partial": w.partial,
                   **_counts_dict(w)} for w in s.weeks],
        "totals": _counts_dict(s.totals),
        "last_week": _change_dict(s.change),
        "newest": [{"category": n.category, "ref": format_ref(n.repo, n.number), "repo": n.repo,
                    "number": n.number, "title": n.title, "created_at": n.created_at.isoformat(),
                    "html_url": n.html_url, "confidence": _r(n.confidence)} for n in s.newest],
    }


def to_dict(report: WeeklyReport) -> dict:
    """The documented JSON document (report/README.md), keys in a fixed order."""
    names = report.category_names()
    return {
        "schema_version": SCHEMA_VERSION,
        "report": "weekly",
        "by": report.by,
        "model_version": report.model_version,
        "engines": list(report.engines),
        "per_engine": report.per_engine,
        "include_prs": report.include_prs,
        "since": report.since.isoformat() if report.since else None,
        "until": report.until.isoformat() if report.until else None,
        "first_week": report.first_week.isoformat() if report.first_week else None,
        "last_week": report.last_week.isoformat() if report.last_week else None,
        "as_of": report.as_of.isoformat() if report.as_of else None,
        "partial_weeks": [w.isoformat() for w in report.partial_weeks],
        "categories": [{"id": c, "name": names[c]} for c in report.categories],
        "issues": report.issues,
        "labeled": report.labeled,
        "sections": [_section_dict(s) for s in report.sections],
    }


def to_json_text(doc: dict) -> str:
    return dumps(doc, indent=2, ensure_ascii=False) + "\n"


def to_json(report: WeeklyReport) -> str:
    return to_json_text(to_dict(report))


def csv_header(report: WeeklyReport) -> list[str]:
    return ["engine", "week", "iso_week", "days", "partial", "total", *report.categories,
            *(f"{c}_share" for c in report.categories)]


def csv_rows(report: WeeklyReport) -> list[list]:
    """One row per section and week: counts, then shares (4 decimals). No totals row: sum the column."""
    return [[s.engine, wk.week.isoformat(), wk.iso_week, wk.days, int(wk.partial), wk.total, *wk.counts.values(),
             *(f"{v:.4f}" for v in wk.shares.values())] for s in report.sections for wk in s.weeks]


def delimited(header: list[str], rows: list[list], sep: str = ",") -> str:
    """CSV (sep ","), or for a pipe tab-separated text (sep "\\t", core.console.plain_cell: whitespace runs become
    one space, control characters visible): a header, then one row per line, full values."""
    if sep == "\t":
        from retriage.core.console import plain_cell

        return "".join("\t".join(plain_cell(v) for v in row) + "\n" for row in [header, *rows])
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([header, *rows])
    return buf.getvalue()


def to_csv(report: WeeklyReport, sep: str = ",") -> str:
    return delimited(csv_header(report), csv_rows(report), sep)


# ------------------------------------------------------------------------------------------------------ Rich

def _what(report: WeeklyReport) -> str:
    return "RE classes" if report.by == "re_class" else "components"


def _cell(n: int, share: float, shares: bool = True) -> str:
    return (f"{n} [dim]{share:.0%}[/]" if shares else str(n)) if n else "[dim]0[/]"


def _delta_cell(ch: Change, category: str | None) -> str:
    d = ch.delta(category)
    if d is None:
        return "[dim]-[/]"
    style = "red" if d > 0 else "green" if d < 0 else "dim"
    return f"[{style}]{d:+.1f}[/]"


def _mean_cell(ch: Change, category: str | None) -> str:
    if not ch.baseline_weeks:
        return "[dim]-[/]"
    return f"{ch.baseline_total if category is None else ch.baseline[category]:.1f}"


def week_label(w: Week) -> str:
    """The Monday, and `*` when the week has fewer than 7 days of data (the caption says so)."""
    return f"{w.week.isoformat()}*" if w.partial else w.week.isoformat()


def section_table(report: WeeklyReport, s: Section, shares: bool = True) -> Table:
    """Weeks x categories. Cells never wrap: with `shares` False (a terminal too narrow for them) the week rows
    hold counts only and the shares get their own row under the totals."""
    scope = s.name if report.per_engine or not report.engines else ", ".join(report.engines)
    t = Table(title=f"[bold]Issues per week by {_what(report)}[/] · {scope}"
                    + (f" · [bold yellow]{report.sample}[/]" if report.sample else ""), title_justify="left",
              box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    t.add_column("week (Mon)", no_wrap=True)
    for c in ("issues", *report.categories):
        t.add_column(c, justify="right", no_wrap=True)
    for w in s.weeks:  # a partial week is dim and marked
        t.add_row(week_label(w), str(w.total) if w.total else "[dim]0[/]",
                  *(_cell(n, w.share(c), shares) for c, n in w.counts.items()), style="dim" if w.partial else None)
    totals = s.totals
    t.add_section()
    t.add_row("[bold]total[/]", f"[bold]{totals.total}[/]",
              *(_cell(n, totals.share(c), shares) for c, n in totals.counts.items()))
    if not shares:
        t.add_row("share", "", *(f"{totals.share(c):.0%}" for c in totals.counts))
    ch = s.change
    if ch is not None:
        t.add_row(f"{ch.baseline_weeks}-wk mean", _mean_cell(ch, None), *(_mean_cell(ch, c) for c in report.categories))
        t.add_row(f"Δ {ch.week:%m-%d}", _delta_cell(ch, None), *(_delta_cell(ch, c) for c in report.categories))
    return t


def _caption(report: WeeklyReport) -> Text:
    names = report.category_names()
    parts = [f"{c} {n}" for c, n in names.items() if n and c not in (UNSURE, UNLABELED)]
    lines = [" · ".join(parts)] if parts else []
    if report.sample:
        lines.append(f"{report.sample}: the counts are not the trackers' volume; read the shares")
    lines.append(f"model {report.model_version or 'none shipped'} · {UNLABELED} = no prediction of this model"
                 + (f" · {UNSURE} = classifier abstained" if UNSURE in report.categories else "")
                 + ("" if report.include_prs else " · pull requests excluded")
                 + " · * partial week (fewer than 7 days of data), never compared · Δ MM-DD = the last full week "
                 f"minus the mean of the (up to) {BASELINE_WEEKS} full weeks before it"
                 + (f" · data as of {report.as_of:%Y-%m-%d %H:%M} UTC" if report.as_of else ""))
    return Text("\n".join(lines), style="dim")


def newest_table(report: WeeklyReport, s: Section) -> Table | Text:
    """The newest issues of each listed category: the reference and day stacked, the title wrapped (never cut)
    and the link whole on its own line (at 80 columns the longest tracker URL fits)."""
    wanted = newest_categories(report.by, report.categories)
    first, last = s.weeks[0].week, s.weeks[-1].week + timedelta(days=6)
    label = "class" if report.by == "re_class" else "component"
    if not s.newest:
        kinds = "resource-class" if report.by == "re_class" else "labeled"
        return Text(f"No {kinds} issues from {first} to {last} ({', '.join(wanted)}).", style="dim")
    t = Table(title=f"Newest issues of each {label}, {first} – {last}",
              title_justify="left", box=None, pad_edge=False, show_header=False, collapse_padding=True)
    t.add_column(label, no_wrap=True, style="bold")
    t.add_column("issue", no_wrap=True)
    t.add_column("title and link", overflow="fold")
    previous = None
    for n in s.newest:
        cell = [Text(n.title)]
        if n.html_url:
            cell.append(Text(n.html_url, style=f"blue link {n.html_url}", no_wrap=True, overflow="fold"))
        t.add_row(n.category if n.category != previous else "",
                  Group(Text(format_ref(n.repo, n.number)), Text(f"{n.created_at:%Y-%m-%d}", style="dim")),
                  Group(*cell))
        previous = n.category
    return t


def report_renderables(report: WeeklyReport, width: int | None = None) -> list:
    """The tables, newest issues and caption; at `width` columns a week table too wide for its shares holds
    counts only (its shares in a row of their own)."""
    out: list = []
    for s in report.sections:
        table = section_table(report, s)
        if width and Console(width=10_000).measure(table).maximum > width:
            table = section_table(report, s, shares=False)
        out += [table, newest_table(report, s), Text("")]
    out.append(_caption(report))
    return out


def no_labels_message(report: WeeklyReport) -> str | None:
    """Why there is nothing to show, with what to run; None when the report has labeled issues."""
    if report.issues == 0:
        return ("no issues match this selection: import some with `retriage demo`, `retriage import FILE` or "
                "`retriage mine`, or widen --since/--until/--engine")
    if report.labeled == 0:
        model = (f"model {report.model_version}" if report.model_version
                 else "a classifier model (none is shipped yet)")
        return (f"none of the {report.issues} issues in this selection is labeled by {model}: "
                "run `retriage label` to label them, then run the report again")
    return None


def print_weekly(con, out: Console | None = None, weeks: int = 12, by: str = "re_class",
                 per_engine: bool = False, **options) -> WeeklyReport | None:
    """Print the weekly report of the whole database (the last `weeks` weeks) to a Rich console.

    For `retriage demo` and notebooks. With nothing labeled it prints how to get labels instead of a table and
    returns None. Extra options go to weekly_report (engines, since, until, include_prs, model_version).
    """
    from retriage.core.console import console
    from retriage.report.weekly import weekly_report

    out = out or console()
    report = weekly_report(con, by=by, per_engine=per_engine, last_weeks=weeks, **options)
    message = no_labels_message(report)
    if message:
        out.print(f"[bold]weekly report[/]: {message}")
        return None
    out.print(Group(*report_renderables(report, out.width)))
    return report


# ------------------------------------------------------------------------------------------- component shares

COMPONENTS_SCHEMA_VERSION = 1


def _pct(x: float | None) -> str:
    return "[dim]-[/]" if x is None else f"{x:.0%}"


def components_dict(report: ComponentReport) -> dict:
    """The documented JSON of `retriage report --components` (report/README.md)."""
    return {
        "schema_version": COMPONENTS_SCHEMA_VERSION,
        "report": "components",
        "model_version": report.model_version,
        "since": report.since.isoformat() if report.since else None,
        "until": report.until.isoformat() if report.until else None,
        "include_prs": report.include_prs,
        "components": list(report.components),
        "engines": [{
            "engine": e.engine, "name": e.name, "labeled": e.labeled_total, "resource": e.resource_total,
            "unlabeled": e.unlabeled,
            "components": [{
                "component": c, "labeled": e.labeled[c], "share": _r(e.share(c)),
                "resource": e.resource[c], "resource_share": _r(e.share(c, resource=True)),
                "published_share": e.reference[c].share if c in e.reference else None,
                "published_source": e.reference[c].url if c in e.reference else None,
            } for c in report.components],
        } for e in report.engines],
    }


def components_rows(report: ComponentReport) -> tuple[list[str], list[list]]:
    """(header, one row per engine and component) for CSV and tab-separated output; shares with 4 decimals."""
    f = (lambda x: "" if x is None else f"{x:.4f}")
    return (["engine", "component", "labeled", "share", "resource", "resource_share", "published_share"],
            [[e.engine, c, e.labeled[c], f(e.share(c)), e.resource[c], f(e.share(c, True)),
              f(e.reference[c].share if c in e.reference else None)]
             for e in report.engines for c in report.components])


def components_tables(report: ComponentReport) -> list:
    period = f"{report.since or 'first issue'} – {report.until or 'last issue'}"
    out: list = []
    sources: dict[str, str] = {}
    for e in report.engines:
        t = Table(title=f"[bold]Components · {e.name}[/] · {period} · {e.labeled_total} labeled issues, "
                        f"{e.resource_total} resource", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        t.add_column("component", no_wrap=True)
        t.add_column("issues", justify="right")
        t.add_column("share", justify="right")
        t.add_column("resource", justify="right")
        t.add_column("share", justify="right")
        t.add_column("published", justify="right")
        for c in report.components:
            ref = e.reference.get(c)
            if ref:
                sources[ref.url] = ref.source
            t.add_row(c, str(e.labeled[c]), _pct(e.share(c)), str(e.resource[c]), _pct(e.share(c, True)),
                      f"{ref.share:.0%}" + (f" [dim]{ref.detail}[/]" if ref.detail else "") if ref else "[dim]-[/]")
        out.append(t)
    notes = ["share = of the engine's labeled issues; resource = RE.1–RE.4 issues (not abstained) and their share"]
    notes += [f"published = {title}, {url}" for url, title in sources.items()]
    if sources:
        notes.append("the study counts coded bugs, retriage every issue the model labels: expect a gap")
    notes.append(f"model {report.model_version or 'none shipped'}"
                 + ("" if report.include_prs else " · pull requests excluded"))
    out.append(Text("\n".join(notes), style="dim"))
    return out


def components_message(report: ComponentReport) -> str | None:
    """Why there is nothing to show; None when some issue of the selection is labeled."""
    if report.issues == 0:
        return "no issues match this selection: widen --since/--until/--engine, or import some with `retriage demo`"
    if report.labeled == 0:
        return (f"none of the {report.issues} issues in this selection is labeled by model "
                f"{report.model_version or '(none shipped)'}: run `retriage label`, then the report again")
    return None
