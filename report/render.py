"""Output formats of the weekly report: Rich tables, CSV, JSON and an Altair stacked bar chart (HTML, PNG).

The JSON and CSV layouts are a public interface, documented in report/README.md; a change of the JSON layout
raises SCHEMA_VERSION.
"""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from pathlib import Path

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from retriage import taxonomy
from retriage.core.output import dumps
from retriage.core.refs import format_ref
from retriage.report.weekly import (BASELINE_WEEKS, UNLABELED, UNSURE, Change, Counts, Section, WeeklyReport,
                                    newest_categories)

SCHEMA_VERSION = 1
CHART_FORMATS = ("png", "html")
FORMATS = ("table", "csv", "json", *CHART_FORMATS)


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
        "week": ch.week.isoformat(),
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
        "weeks": [{"week": w.week.isoformat(), "iso_week": w.iso_week, **_counts_dict(w)} for w in s.weeks],
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
        "categories": [{"id": c, "name": names[c]} for c in report.categories],
        "issues": report.issues,
        "labeled": report.labeled,
        "sections": [_section_dict(s) for s in report.sections],
    }


def to_json(report: WeeklyReport) -> str:
    return dumps(to_dict(report), indent=2, ensure_ascii=False) + "\n"


def csv_header(report: WeeklyReport) -> list[str]:
    return ["engine", "week", "iso_week", "total", *report.categories, *(f"{c}_share" for c in report.categories)]


def to_csv(report: WeeklyReport) -> str:
    """One row per section and week: counts, then shares (4 decimals). No totals row: sum the column."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(csv_header(report))
    for s in report.sections:
        for wk in s.weeks:
            w.writerow([s.engine, wk.week.isoformat(), wk.iso_week, wk.total, *wk.counts.values(),
                        *(f"{v:.4f}" for v in wk.shares.values())])
    return buf.getvalue()


# ------------------------------------------------------------------------------------------------------ Rich

def _what(report: WeeklyReport) -> str:
    return "RE classes" if report.by == "re_class" else "components"


def _cell(n: int, share: float) -> str:
    return f"{n} [dim]{share:.0%}[/]" if n else "[dim]0[/]"


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


def section_table(report: WeeklyReport, s: Section) -> Table:
    scope = s.name if report.per_engine or not report.engines else ", ".join(report.engines)
    t = Table(title=f"[bold]Issues per week by {_what(report)}[/] · {scope}", title_justify="left",
              box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    t.add_column("week (Mon)", no_wrap=True, min_width=11)
    t.add_column("issues", justify="right", no_wrap=True, min_width=5)
    for c in report.categories:  # long names fold in the header on narrow terminals; the cells stay whole
        t.add_column(c, justify="right", overflow="fold", min_width=6)
    for w in s.weeks:
        t.add_row(w.week.isoformat(), str(w.total) if w.total else "[dim]0[/]",
                  *(_cell(n, w.share(c)) for c, n in w.counts.items()))
    totals = s.totals
    t.add_section()
    t.add_row("[bold]total[/]", f"[bold]{totals.total}[/]",
              *(_cell(n, totals.share(c)) for c, n in totals.counts.items()))
    ch = s.change
    if ch is not None:
        t.add_row(f"{ch.baseline_weeks}-wk mean", _mean_cell(ch, None), *(_mean_cell(ch, c) for c in report.categories))
        t.add_row("Δ last week", _delta_cell(ch, None), *(_delta_cell(ch, c) for c in report.categories))
    return t


def _caption(report: WeeklyReport) -> Text:
    names = report.category_names()
    parts = [f"{c} {n}" for c, n in names.items() if n and c not in (UNSURE, UNLABELED)]
    model = report.model_version or "none shipped"
    lines = []
    if parts:
        lines.append(" · ".join(parts))
    lines.append(f"model {model} · {UNLABELED} = no prediction of this model"
                 + (f" · {UNSURE} = classifier abstained" if UNSURE in report.categories else "")
                 + ("" if report.include_prs else " · pull requests excluded")
                 + f" · Δ last week = last week minus the mean of the (up to) {BASELINE_WEEKS} weeks before it")
    return Text("\n".join(lines), style="dim")


def newest_table(report: WeeklyReport, s: Section) -> Table | Text:
    wanted = newest_categories(report.by, report.categories)
    week = s.weeks[-1].week
    label = "class" if report.by == "re_class" else "component"
    if not s.newest:
        kinds = "resource-class" if report.by == "re_class" else "labeled"
        return Text(f"No {kinds} issues in the week of {week} ({', '.join(wanted)}).", style="dim")
    t = Table(title=f"Newest issues of each {label}, week of {week} – {week + timedelta(days=6)}",
              title_justify="left", box=None, pad_edge=False, show_header=False, expand=True)
    refs = [format_ref(n.repo, n.number) for n in s.newest]
    t.add_column(label, no_wrap=True, style="bold", min_width=max(len(n.category) for n in s.newest))
    t.add_column("issue", no_wrap=True, min_width=max(map(len, refs)))
    t.add_column("created", no_wrap=True, style="dim", min_width=10)
    t.add_column("title and link", ratio=1)
    previous = None
    for n, ref in zip(s.newest, refs):
        cell = [Text(n.title, no_wrap=True, overflow="ellipsis")]
        if n.html_url:  # the link folds rather than being cut, so it stays usable as plain text
            cell.append(Text(n.html_url, style=f"blue link {n.html_url}", overflow="fold"))
        t.add_row(n.category if n.category != previous else "", ref,
                  n.created_at.strftime("%Y-%m-%d"), Group(*cell))
        previous = n.category
    return t


def report_renderables(report: WeeklyReport) -> list:
    out: list = []
    for s in report.sections:
        out += [section_table(report, s), newest_table(report, s), Text("")]
    out.append(_caption(report))
    return out


def print_report(report: WeeklyReport, out: Console) -> None:
    out.print(Group(*report_renderables(report)))


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
    print_report(report, out)
    return report


# ----------------------------------------------------------------------------------------------------- chart

_RESOURCE_COLORS = ["#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#b279a2", "#9d755d", "#ff9da6",
                    "#eeca3b", "#439894"]
_GREYS = {"non_resource": "#9e9e9e", UNSURE: "#d9c38a", UNLABELED: "#e3e3e3"}


def category_colors(report: WeeklyReport) -> list[str]:
    non_resource = set(taxonomy.re_class_ids()) - set(taxonomy.resource_class_ids()) if report.by == "re_class" \
        else set()
    colors, i = [], 0
    for c in report.categories:
        if c in (UNSURE, UNLABELED):
            colors.append(_GREYS[c])
        elif c in non_resource:
            colors.append(_GREYS["non_resource"])
        else:
            colors.append(_RESOURCE_COLORS[i % len(_RESOURCE_COLORS)])
            i += 1
    return colors


def chart_records(report: WeeklyReport) -> list[dict]:
    """Long-format rows for the chart: one per section, week and category."""
    order = {c: i for i, c in enumerate(report.categories)}
    return [{"engine": s.name, "week": w.week.isoformat(), "week_end": (w.week + timedelta(days=7)).isoformat(),
             "category": c, "order": order[c], "count": n, "share": round(w.share(c), 4), "total": w.total}
            for s in report.sections for w in s.weeks for c, n in w.counts.items()]


def _monday_ticks(report: WeeklyReport, most: int = 14) -> list:
    """Axis ticks on Mondays (every k-th week), so each label sits at the start of its bar."""
    import altair as alt

    weeks = report.weeks
    step = max(1, -(-len(weeks) // most))
    return [alt.DateTime(year=w.year, month=w.month, date=w.day, utc=True) for w in weeks[::step]]


def weekly_chart(report: WeeklyReport, width: int = 760, height: int = 260):
    """An Altair stacked bar chart: issues per week, stacked by category, one row per section."""
    import altair as alt

    what = _what(report)
    # Bars span their week (x..x2, Monday to Monday) on a real time axis; Vega-Lite does not stack ranged bars,
    # so the stack is an explicit transform in the report's column order (first category at the bottom).
    bars = alt.Chart(alt.Data(values=chart_records(report))).transform_stack(
        stack="count", groupby=["engine", "week"], as_=["y0", "y1"], sort=[alt.SortField("order", "ascending")],
    ).mark_bar(stroke="white", strokeWidth=0.3).encode(
        x=alt.X("week:T", title="week (Monday, UTC)", scale=alt.Scale(type="utc"),
                axis=alt.Axis(format="%Y-%m-%d", labelAngle=-30, values=_monday_ticks(report))),
        x2="week_end:T",
        y=alt.Y("y0:Q", title="issues created"),
        y2="y1:Q",
        color=alt.Color("category:N", title=what,
                        scale=alt.Scale(domain=report.categories, range=category_colors(report)),
                        sort=report.categories),
        tooltip=[alt.Tooltip("engine:N"), alt.Tooltip("week:T", format="%Y-%m-%d"), alt.Tooltip("category:N"),
                 alt.Tooltip("count:Q"), alt.Tooltip("share:Q", format=".0%"), alt.Tooltip("total:Q")],
    ).properties(width=width, height=height)
    subtitle = (f"{report.first_week} – {report.last_week} · model {report.model_version or 'none'}"
                + ("" if report.include_prs else " · issues only"))
    title = alt.TitleParams(f"Issues per week by {what}", subtitle=subtitle, anchor="start")
    if len(report.sections) > 1:
        order = [s.name for s in report.sections]
        return bars.facet(row=alt.Row("engine:N", title=None, sort=order)).resolve_scale(y="independent") \
            .properties(title=title)
    return bars.properties(title=alt.TitleParams(f"Issues per week by {what} · {report.sections[0].name}"
                                                 if report.sections else title.text,
                                                 subtitle=subtitle, anchor="start"))


def save_chart(report: WeeklyReport, path, fmt: str | None = None):
    """Write the chart as PNG or self-contained HTML (JavaScript inlined, opens offline) to a path or an open
    file (binary for PNG, text for HTML; `fmt` required then). Returns `path`."""
    fmt = fmt or Path(path).suffix.lstrip(".").lower()
    if fmt not in CHART_FORMATS:
        raise ValueError(f"chart format must be one of {CHART_FORMATS}, not {fmt!r}")
    chart = weekly_chart(report)
    target = str(path) if isinstance(path, (str, Path)) else path
    if fmt == "png":
        chart.save(target, format="png", scale_factor=2)
    else:
        chart.save(target, format="html", inline=True)
    return path
