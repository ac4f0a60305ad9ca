"""Altair charts of the reports (rendered to PNG or HTML by vl-convert), all coloured from report/palette.toml.

The weekly chart has, per section (engine), a panel of stacked bars and, below it, a panel of share lines:

- bars: the categories that are not share lines, stacked in column order — for RE classes the resource
  classes RE.1-RE.4 (and any value outside the taxonomy); for components every component;
- lines: `none`, `unsure` and `unlabeled` (whichever the report has and counts), as the share of all issues
  of the week, so 90 % `none` no longer flattens the resource classes;
- a partial week (report.weekly: fewer than 7 days of data) is drawn lighter, with its bar outlined in dashes
  and a "partial" label; its share points are hollow;
- the y scale of the bars is the same for every engine (its top is the largest weekly stack of any engine);
  the subtitle says so.
"""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

from retriage import taxonomy
from retriage.report import palette
from retriage.report.components import ComponentReport
from retriage.report.weekly import UNLABELED, UNSURE, WeeklyReport

CHART_FORMATS = ("png", "html")
PARTIAL_OPACITY = 0.35


def line_categories(report: WeeklyReport) -> list[str]:
    """Categories drawn as share lines (not stacked): none/unsure/unlabeled, those the report counts."""
    lines = [UNSURE, UNLABELED]
    if report.by == "re_class":
        lines = [c for c in taxonomy.re_class_ids() if c not in taxonomy.resource_class_ids()] + lines
    counted = {c for s in report.sections for w in s.weeks for c, n in w.counts.items() if n}
    return [c for c in report.categories if c in lines and c in counted]


def bar_categories(report: WeeklyReport) -> list[str]:
    skip = set(line_categories(report)) | {UNSURE, UNLABELED}
    if report.by == "re_class":
        skip |= set(taxonomy.re_class_ids()) - set(taxonomy.resource_class_ids())
    return [c for c in report.categories if c not in skip]


def category_colors(report: WeeklyReport) -> list[str]:
    """The palette colour of each of the report's categories, in column order."""
    return palette.colors(report.categories)


def chart_records(report: WeeklyReport) -> list[dict]:
    """Long-format rows for the chart: one per section, week and category."""
    order = {c: i for i, c in enumerate(report.categories)}
    return [{"engine": s.name, "week": w.week.isoformat(), "week_end": (w.week + timedelta(days=7)).isoformat(),
             "category": c, "order": order[c], "count": n, "share": round(w.share(c), 4), "total": w.total,
             "partial": w.partial, "days": w.days}
            for s in report.sections for w in s.weeks for c, n in w.counts.items()]


def _utc(d: date):
    import altair as alt

    return alt.DateTime(year=d.year, month=d.month, date=d.day, utc=True)


def _monday_ticks(weeks: list[date], most: int = 14) -> list:
    """Axis ticks on Mondays (every k-th week), so each label sits at the start of its bar."""
    step = max(1, -(-len(weeks) // most))
    return [_utc(w) for w in weeks[::step]]


def _max_stack(report: WeeklyReport, bars: list[str]) -> int:
    return max([sum(w.counts[c] for c in bars) for s in report.sections for w in s.weeks] or [0])


def weekly_chart(report: WeeklyReport, width: int = 760, height: int = 170, line_height: int = 70):
    """The weekly chart (see the module docstring): one bar panel and one share panel per section."""
    import altair as alt

    what = "RE class" if report.by == "re_class" else "component"
    bars, lines = bar_categories(report), line_categories(report)
    shown = bars + lines
    records = [r for r in chart_records(report) if r["category"] in shown]
    weeks = report.weeks
    x_scale = alt.Scale(type="utc", domain=[_utc(weeks[0]), _utc(weeks[-1] + timedelta(days=7))]) if weeks \
        else alt.Scale(type="utc")
    x_axis = alt.Axis(format="%Y-%m-%d", labelAngle=-30, values=_monday_ticks(weeks), title=None)
    color = alt.Color("category:N", title=what, sort=shown,
                      scale=alt.Scale(domain=shown, range=palette.colors(shown)),
                      legend=alt.Legend(orient="right", symbolType="square"))
    top = max(1, _max_stack(report, bars))
    tooltip = [alt.Tooltip("engine:N"), alt.Tooltip("week:T", format="%Y-%m-%d"), alt.Tooltip("category:N"),
               alt.Tooltip("count:Q"), alt.Tooltip("share:Q", format=".1%"), alt.Tooltip("total:Q"),
               alt.Tooltip("days:Q", title="days of data")]
    partial_opacity = alt.condition("datum.partial", alt.value(PARTIAL_OPACITY), alt.value(1.0))
    rows = []
    for s in report.sections:
        data = alt.Data(values=[r for r in records if r["engine"] == s.name])
        base = alt.Chart(data)
        # Bars span their week (x..x2, Monday to Monday) on a real time axis; Vega-Lite does not stack ranged
        # bars, so the stack is an explicit transform in the report's column order (first category at the bottom).
        stacked = base.transform_filter(alt.FieldOneOfPredicate(field="category", oneOf=bars)).transform_stack(
            stack="count", groupby=["week"], as_=["y0", "y1"], sort=[alt.SortField("order", "ascending")],
        ).mark_bar(stroke="white", strokeWidth=0.3).encode(
            x=alt.X("week:T", scale=x_scale, axis=x_axis), x2="week_end:T",
            y=alt.Y("y0:Q", title=f"issues ({'RE.1–RE.4' if report.by == 're_class' else 'all components'})",
                    scale=alt.Scale(domain=[0, top], nice=False)),
            y2="y1:Q", color=color, opacity=partial_opacity, tooltip=tooltip)
        partial = [r for r in records if r["engine"] == s.name and r["partial"] and r["category"] == shown[0]] \
            if shown else []
        layers = [stacked]
        if partial:
            marks = alt.Chart(alt.Data(values=[{"week": r["week"], "week_end": r["week_end"], "days": r["days"],
                                                "label": f"partial ({r['days']} d)"} for r in partial]))
            layers.append(marks.mark_rect(fill=None, stroke="#555555", strokeDash=[3, 2], strokeWidth=0.8).encode(
                x=alt.X("week:T", scale=x_scale, axis=x_axis), x2="week_end:T", y=alt.value(0),
                y2=alt.value(height)))
            layers.append(marks.transform_calculate(mid="toDate(datum.week) + 3.5 * 86400000").mark_text(
                angle=270, align="right", baseline="middle", dy=0, dx=-3, fontSize=9, color="#555555").encode(
                x=alt.X("mid:T", scale=x_scale), y=alt.value(0), text="label:N"))
        panel = alt.layer(*layers).properties(width=width, height=height,
                                              title=alt.TitleParams(s.name, anchor="start", fontSize=13))
        rows.append(panel)
        if lines:
            line_base = base.transform_filter(alt.FieldOneOfPredicate(field="category", oneOf=lines)).transform_calculate(
                mid="toDate(datum.week) + 3.5 * 86400000")
            enc = dict(x=alt.X("mid:T", scale=x_scale, axis=alt.Axis(labels=False, ticks=False, title=None)),
                       y=alt.Y("share:Q", title="share of issues", scale=alt.Scale(domain=[0, 1]),
                               axis=alt.Axis(format="%", values=[0, 0.5, 1])),
                       color=color, tooltip=tooltip)
            line = line_base.mark_line(strokeWidth=1.6).encode(**enc)
            points = line_base.mark_point(size=14, filled=True).encode(
                **enc, fillOpacity=alt.condition("datum.partial", alt.value(0), alt.value(1)))
            rows.append(alt.layer(line, points).properties(width=width, height=line_height))
    shared = "weeks Monday–Sunday, UTC" + (" · y scale shared by all engines" if len(report.sections) > 1 else "")
    line_note = f" · lines: share of all issues that week ({', '.join(lines)})" if lines else ""
    partial_note = (f" · lighter, dashed = partial week (data as of {report.as_of:%Y-%m-%d})"
                    if report.partial_weeks and report.as_of else "")
    scope = report.sections[0].name if len(report.sections) == 1 else "per engine"
    subtitle = [f"{report.first_week} – {report.last_week} · model {report.model_version or 'none'}"
                + ("" if report.include_prs else " · issues only") + f" · {shared}",
                f"bars: {', '.join(bars)} stacked{line_note}{partial_note}"]
    title = alt.TitleParams(f"Issues per week by {what} · {scope}", subtitle=subtitle, anchor="start")
    return alt.vconcat(*rows, spacing=8).resolve_scale(color="shared").properties(title=title) \
        .configure_view(stroke=None).configure_axis(grid=True, gridColor="#eeeeee")


def component_chart(report: ComponentReport, width: int = 520):
    """Horizontal bars: each engine's share of labeled issues per component (palette colours), with the
    published share as a black tick where there is one."""
    import altair as alt

    rows, refs = [], []
    for e in report.engines:
        for c in report.components:
            share = e.share(c)
            rows.append({"engine": e.name, "component": c, "share": share or 0.0, "issues": e.labeled[c],
                         "resource_share": e.share(c, resource=True) or 0.0})
            if c in e.reference:
                refs.append({"engine": e.name, "component": c, "share": e.reference[c].share,
                             "source": e.reference[c].source})
    comps = report.components
    color = alt.Color("component:N", sort=comps, scale=alt.Scale(domain=comps, range=palette.colors(comps)),
                      legend=None)
    y = alt.Y("component:N", sort=comps, title=None)
    bars = alt.Chart(alt.Data(values=rows)).mark_bar().encode(
        x=alt.X("share:Q", axis=alt.Axis(format="%"), title="share of labeled issues"), y=y, color=color,
        tooltip=["engine:N", "component:N", "issues:Q", alt.Tooltip("share:Q", format=".1%"),
                 alt.Tooltip("resource_share:Q", format=".1%", title="share of resource issues")])
    panels = []
    for e in (e for e in report.engines if e.labeled_total):  # an engine without labeled issues has no bars
        mine = [r for r in refs if r["engine"] == e.name]
        layers = [bars.transform_filter(alt.FieldEqualPredicate(field="engine", equal=e.name))]
        if mine:
            layers.append(alt.Chart(alt.Data(values=mine)).mark_tick(color="black", thickness=2, size=18).encode(
                x="share:Q", y=y, tooltip=["source:N", alt.Tooltip("share:Q", format=".0%", title="published")]))
        panels.append(alt.layer(*layers).properties(width=width, height=22 * len(comps), title=alt.TitleParams(
            f"{e.name} · {e.labeled_total} labeled issues", anchor="start", fontSize=13)))
    period = f"{report.since or 'first issue'} – {report.until or 'last issue'}"
    return alt.vconcat(*panels, spacing=10).resolve_scale(x="shared").properties(title=alt.TitleParams(
        "Component shares per engine", anchor="start",
        subtitle=f"{period} · model {report.model_version or 'none'} · bar = share of labeled issues · "
                 "black tick = share published by arXiv 2506.09713")).configure_view(stroke=None)


def save(chart, path, fmt: str | None = None):
    """Write a chart as PNG (2x) or self-contained HTML (JavaScript inlined, opens offline) to a path or an open
    file (binary for PNG, text for HTML; `fmt` required then). Returns `path`."""
    is_path = isinstance(path, (str, Path))
    fmt = fmt or (Path(path).suffix.lstrip(".").lower() if is_path else None)
    if fmt not in CHART_FORMATS:
        raise ValueError(f"chart format must be one of {CHART_FORMATS}, not {fmt!r}")
    target = str(path) if is_path else path
    if fmt == "png":
        chart.save(target, format="png", scale_factor=2)
    else:
        chart.save(target, format="html", inline=True)
    return path


def save_chart(report: WeeklyReport, path: str | Path, fmt: str | None = None) -> Path:
    return save(weekly_chart(report), path, fmt)
