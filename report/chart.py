"""Altair charts of the reports (rendered to PNG or HTML by vl-convert), all coloured from report/palette.toml.

The weekly chart has, per section (engine), a panel of stacked bars and, for RE classes, a share panel below it:

- bars: the resource classes RE.1-RE.4 (and any value outside the taxonomy) stacked in column order, or every
  component; the y scale is the same for every engine (its top is the largest weekly stack of any engine);
- share panel: each week's resource share (RE.1-RE.4 over the issues with a class, not unsure nor unlabeled)
  as a point, and its ROLLING-week rolling share (the resource issues of those weeks over their labeled
  issues) as a line, so a trend stands out from one week's noise; the tooltip gives the counts;
- a partial week (fewer than 7 days of data) is drawn lighter, outlined in dashes, its share point hollow;
- on a sample (report.sample) the title says so.
"""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

from retriage import taxonomy
from retriage.report import palette
from retriage.report.components import ComponentReport
from retriage.report.weekly import UNLABELED, UNSURE, WeeklyReport

CHART_FORMATS = ("png", "html")
ROLLING = 4  # weeks of the rolling share


def bar_categories(report: WeeklyReport) -> list[str]:
    skip = {UNSURE, UNLABELED}
    if report.by == "re_class":
        skip |= set(taxonomy.re_class_ids()) - set(taxonomy.resource_class_ids())
    return [c for c in report.categories if c not in skip]


def share_records(report: WeeklyReport) -> list[dict]:
    """Per section and week shown: resource issues, labeled issues, the share and the rolling share (the window
    reaches into the weeks before those shown, when the report has them)."""
    res = set(taxonomy.resource_class_ids())
    out = []
    for s in report.sections:
        rows = s.earlier + s.weeks
        counts = [(sum(n for c, n in w.counts.items() if c in res),
                   sum(n for c, n in w.counts.items() if c not in (UNSURE, UNLABELED))) for w in rows]
        for i, w in enumerate(rows[len(s.earlier):], len(s.earlier)):
            k, n = counts[i]
            rk, rn = (sum(x[j] for x in counts[max(0, i - ROLLING + 1):i + 1]) for j in (0, 1))
            out.append({"engine": s.name, "mid": (w.week + timedelta(days=3, hours=12)).isoformat(),
                        "resource": k, "labeled": n, "share": round(k / n, 4) if n else None,
                        "rolling": round(rk / rn, 4) if rn else None, "rolling_resource": rk, "rolling_labeled": rn,
                        "partial": w.partial})
    return out


def _utc(d: date):
    import altair as alt

    return alt.DateTime(year=d.year, month=d.month, date=d.day, utc=True)


def weekly_chart(report: WeeklyReport, width: int = 760, height: int = 170, line_height: int = 90):
    """The weekly chart (see the module docstring): a bar panel and, for RE classes, a share panel per section."""
    import altair as alt

    what = "RE class" if report.by == "re_class" else "component"
    bars, weeks = bar_categories(report), report.weeks
    order = {c: i for i, c in enumerate(report.categories)}
    records = [{"engine": s.name, "week": w.week.isoformat(), "week_end": (w.week + timedelta(days=7)).isoformat(),
                "category": c, "order": order[c], "count": n, "total": w.total, "partial": w.partial, "days": w.days}
               for s in report.sections for w in s.weeks for c, n in w.counts.items() if c in bars]
    shares = share_records(report) if report.by == "re_class" else []
    x_scale = alt.Scale(type="utc", domain=[_utc(weeks[0]), _utc(weeks[-1] + timedelta(days=7))]) if weeks \
        else alt.Scale(type="utc")
    step = max(1, -(-len(weeks) // 14))  # at most 14 ticks, on Mondays
    x_axis = alt.Axis(format="%Y-%m-%d", labelAngle=-30, values=[_utc(w) for w in weeks[::step]], title=None)
    color = alt.Color("category:N", title=what, sort=bars, scale=alt.Scale(domain=bars, range=palette.colors(bars)),
                      legend=alt.Legend(orient="right", symbolType="square"))
    top = max([sum(w.counts[c] for c in bars) for s in report.sections for w in s.weeks] or [1]) or 1
    tooltip = [alt.Tooltip("engine:N"), alt.Tooltip("week:T", format="%Y-%m-%d"), alt.Tooltip("category:N"),
               alt.Tooltip("count:Q"), alt.Tooltip("total:Q", title="issues that week"),
               alt.Tooltip("days:Q", title="days of data")]
    rows = []
    for s in report.sections:
        base = alt.Chart(alt.Data(values=[r for r in records if r["engine"] == s.name]))
        # Bars span their week (x..x2) on a time axis; Vega-Lite does not stack ranged bars, so the stack is an
        # explicit transform in the report's column order (first category at the bottom).
        layers = [base.transform_stack(stack="count", groupby=["week"], as_=["y0", "y1"],
                                       sort=[alt.SortField("order", "ascending")]).mark_bar(
            stroke="white", strokeWidth=0.3).encode(
            x=alt.X("week:T", scale=x_scale, axis=x_axis), x2="week_end:T",
            y=alt.Y("y0:Q", title=f"issues ({'RE.1–RE.4' if report.by == 're_class' else 'all components'})",
                    scale=alt.Scale(domain=[0, top], nice=False)), y2="y1:Q", color=color, tooltip=tooltip,
            opacity=alt.condition("datum.partial", alt.value(0.35), alt.value(1.0)))]
        if any(w.partial for w in s.weeks):
            partial = base.transform_filter("datum.partial && datum.order == 0")
            layers.append(partial.mark_rect(fill=None, stroke="#555555", strokeDash=[3, 2], strokeWidth=0.8).encode(
                x=alt.X("week:T", scale=x_scale, axis=x_axis), x2="week_end:T", y=alt.value(0), y2=alt.value(height)))
        rows.append(alt.layer(*layers).properties(width=width, height=height,
                                                  title=alt.TitleParams(s.name, anchor="start", fontSize=13)))
        if shares:
            line = alt.Chart(alt.Data(values=[r for r in shares if r["engine"] == s.name]))
            x = alt.X("mid:T", scale=x_scale, axis=alt.Axis(labels=False, ticks=False, title=None))
            tip = ["mid:T", "resource:Q", "labeled:Q", alt.Tooltip("share:Q", format=".0%"), "rolling_resource:Q",
                   "rolling_labeled:Q", alt.Tooltip("rolling:Q", format=".0%")]
            rows.append(alt.layer(
                line.mark_point(size=18, color="#555555").encode(
                    x=x, y=alt.Y("share:Q", title="resource share", axis=alt.Axis(format="%")), tooltip=tip,
                    fill=alt.condition("datum.partial", alt.value("white"), alt.value("#555555"))),
                line.mark_line(color="#c0392b", strokeWidth=2).encode(x=x, y="rolling:Q", tooltip=tip),
            ).properties(width=width, height=line_height))
    shared = "weeks Monday–Sunday, UTC" + (" · y scale shared by all engines" if len(report.sections) > 1 else "")
    share_note = (f" · below: grey points = the week's resource share of labeled issues, red line = its {ROLLING}-week "
                  "rolling share" if shares else "")
    partial_note = (f" · lighter, dashed = partial week (data as of {report.as_of:%Y-%m-%d})"
                    if report.partial_weeks and report.as_of else "")
    scope = report.sections[0].name if len(report.sections) == 1 else "per engine"
    subtitle = [f"{report.first_week} – {report.last_week} · model {report.model_version or 'none'}"
                + ("" if report.include_prs else " · issues only") + f" · {shared}",
                f"bars: {', '.join(bars)} stacked{share_note}{partial_note}"]
    if report.sample:
        subtitle.insert(0, f"{report.sample.upper()}: counts are not the trackers' volume; read the shares")
    title = alt.TitleParams(f"Issues per week by {what} · {scope}", subtitle=subtitle, anchor="start",
                            subtitleColor="#333333")
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
