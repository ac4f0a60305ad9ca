"""Output formats of `retriage report --releases` (report.releases): JSON, CSV/TSV rows, Rich tables, the chart
(a share per release with its interval, beside the share over the earlier releases) and the HTML page.
The JSON layout is documented in report/README.md; a change raises SCHEMA_VERSION."""

from __future__ import annotations

from html import escape

from rich import box
from rich.table import Table
from rich.text import Text

from retriage import taxonomy
from retriage.report.releases import RESOURCE, Flag, Release, ReleaseReport, Share

SCHEMA_VERSION = 1
MARK = "▲"  # a flagged share


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _share_dict(s: Share | None) -> dict | None:
    if s is None:
        return None
    low, high = s.interval or (None, None)
    return {"count": s.count, "labeled": s.n, "share": _r(s.share), "low": _r(low), "high": _r(high)}


def _wanted() -> list[str]:
    return [RESOURCE, *taxonomy.resource_class_ids()]


def _release_dict(r: Release) -> dict:
    return {
        "release": r.release, "sort_key": r.sort_key, "compared": r.before is not None, "issues": r.issues,
        "labeled": r.labeled, "counts": dict(r.counts),
        "shares": {w: _share_dict(r.share(w)) for w in _wanted()},
        "before": {w: _share_dict(r.before_share(w)) for w in _wanted()} if r.before is not None else None,
        "flags": [{"what": f.what, "difference": _r(f.difference), "low": _r(f.low), "high": _r(f.high)}
                  for f in r.flags],
        "regressions": {"issues": sum(r.regressions.values()), "counts": dict(r.regressions)},
    }


def to_dict(rep: ReleaseReport) -> dict:
    return {"schema_version": SCHEMA_VERSION, "report": "releases", "model_version": rep.model_version,
            "test": rep.test, "classes": rep.classes, "issues": rep.issues,
            "engines": [{"engine": e.engine, "name": e.name, "issues": e.issues, "regressions": e.regressions,
                         "releases": [_release_dict(r) for r in e.releases]} for e in rep.engines]}


def header(rep: ReleaseReport) -> list[str]:
    shares = [f"{w}_{k}" for w in _wanted() for k in ("share", "low", "high")]
    return ["engine", "release", "issues", "labeled", *rep.classes, *shares, "before_labeled",
            *(f"{w}_before" for w in _wanted()), "flags", "regressions"]


def rows(rep: ReleaseReport) -> list[list]:
    """One row per engine and release, in header() order: counts, shares with interval (4 decimals)."""
    out = []
    fmt = (lambda x: "" if x is None else f"{x:.4f}")
    for e in rep.engines:
        for r in e.releases:
            shares = [fmt(x) for w in _wanted() for s in [r.share(w)] for x in (s.share, *(s.interval or (None,) * 2))]
            before = [fmt(r.before_share(w).share) if r.before is not None else "" for w in _wanted()]
            out.append([e.engine, r.release, r.issues, r.labeled, *(r.counts.get(c, 0) for c in rep.classes), *shares,
                        r.before_share(RESOURCE).n if r.before is not None else "", *before,
                        ";".join(f.what for f in r.flags), sum(r.regressions.values())])
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _cell(r: Release, what: str, shares: bool = True) -> str:
    s = r.share(what)
    text = (f"{s.count} {_pct(s.share)}" if shares else str(s.count)) if s.count else "[dim]0[/]"
    return text + (f" [bold red]{MARK}[/]" if any(f.what == what for f in r.flags) else "")


def flag_line(engine: str, r: Release, f: Flag) -> str:
    lo, hi = f.share.interval
    return (f"{MARK} {engine} {r.release} {f.what}: {f.share.count}/{f.share.n} = {f.share.share:.1%} "
            f"({lo:.1%}–{hi:.1%}) against {f.before.count}/{f.before.n} = {f.before.share:.1%} over the earlier "
            "releases; "
            f"difference {f.difference * 100:+.1f} points ({f.low * 100:+.1f} to {f.high * 100:+.1f})")


def _table(rep: ReleaseReport, e, sample: str | None, shares: bool) -> Table:
    t = Table(title=f"[bold]RE classes per release · {e.name}[/] · {e.issues:,} issues"
                    + (f", {e.regressions:,} regression reports apart" if e.regressions else "")
                    + (f" · [bold]{sample}[/]" if sample else ""),
              title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for name in ("release", "issues", *taxonomy.resource_class_ids(), "res.", "95% CI", "before", "regr."):
        t.add_column(name, justify="left" if name == "release" else "right", no_wrap=True)
    classes = taxonomy.resource_class_ids()
    for r in e.releases:
        ci, before = r.share(RESOURCE).interval, r.before_share(RESOURCE)
        t.add_row(r.release, str(r.issues), *(_cell(r, w, shares) for w in classes), _cell(r, RESOURCE),
                  f"{ci[0] * 100:.0f}–{ci[1]:.0%}" if ci else "-", _pct(before.share) if before else "",
                  str(sum(r.regressions.values())), style=None if r.ordered else "dim")
    return t


def tables(rep: ReleaseReport, sample: str | None = None, width: int | None = None) -> list:
    """A table per engine with releases (at `width` columns, one too wide for the class shares holds their counts
    only), the flags in full, the caption."""
    from rich.console import Console

    out: list = []
    for e in (e for e in rep.engines if e.releases):
        t = _table(rep, e, sample, True)
        out.append(_table(rep, e, sample, False) if width and Console(width=10_000).measure(t).maximum > width else t)
    out += [Text(flag_line(e.name, r, f), style="bold") for e, r, f in rep.flags]
    out.append(Text(caption(rep), style="dim"))
    return out


def caption(rep: ReleaseReport) -> str:
    return (f"res. = RE.1–RE.4; shares of the labeled issues (not unsure, not unlabeled), with the 95 % Wilson "
            f"interval of the resource share; before = the share over the engine's earlier releases. "
            f"{MARK} flagged: {rep.test} (the resource share and each class tested apart, no correction for the "
            "number of tests). Class: correction, else team label, else model "
            f"{rep.model_version or '(none shipped)'}. regr. = regression reports (a good and a bad version), "
            "counted apart under the bad release; main and unknown are not compared.")


CHART_MIN_LABELED = 5  # a release with fewer labeled issues is in the tables, not on the chart: its 0-80 % bar
                       # says nothing and draws the eye (often one issue whose version line was a typo)


def chart(rep: ReleaseReport, width: int = 640, height: int = 180):
    """Per engine: the resource share of each numbered release with at least CHART_MIN_LABELED labeled issues
    (point, Wilson interval as a rule), the share over the earlier releases (grey line); a flagged release in
    red."""
    import altair as alt

    data = []
    for e in rep.engines:
        for r in (r for r in e.releases if r.ordered):
            s, b = r.share(RESOURCE), r.before_share(RESOURCE)
            if s.n < CHART_MIN_LABELED:
                continue
            lo, hi = s.interval or (None, None)
            data.append({"engine": e.name, "release": r.release, "order": r.sort_key, "share": s.share, "low": lo,
                         "high": hi, "labeled": s.n, "before": b.share if b else None,
                         "flagged": any(f.what == RESOURCE for f in r.flags)})
    base = alt.Chart(alt.Data(values=data))
    x = alt.X("release:N", sort=alt.SortField("order"), title=None, axis=alt.Axis(labelAngle=-40))
    y = alt.Y("share:Q", title="resource share (RE.1–RE.4)", axis=alt.Axis(format="%"))
    tip = ["release:N", alt.Tooltip("share:Q", format=".1%"), alt.Tooltip("low:Q", format=".1%"),
           alt.Tooltip("high:Q", format=".1%"), "labeled:Q", alt.Tooltip("before:Q", format=".1%")]
    red = alt.condition("datum.flagged", alt.value("#c0392b"), alt.value("#34495e"))
    layers = [base.mark_rule(strokeWidth=1.5).encode(x=x, y="low:Q", y2="high:Q", color=red),
              base.mark_circle(size=45, opacity=1).encode(x=x, y=y, color=red, tooltip=tip),
              base.mark_line(color="#999999", strokeDash=[4, 3]).encode(x=x, y="before:Q")]
    panels = [alt.layer(*layers).transform_filter(alt.FieldEqualPredicate(field="engine", equal=e.name))
              .properties(width=width, height=height, title=alt.TitleParams(e.name, anchor="start", fontSize=13))
              for e in rep.engines if any(r.ordered for r in e.releases)]
    return alt.vconcat(*panels, spacing=12).properties(title=alt.TitleParams(
        "Resource-bug share per release", anchor="start",
        subtitle=["point: share of the release's labeled issues, bar: 95 % Wilson interval, dashed: share over "
                  "the earlier releases", f"red: flagged by {rep.test}",
                  f"releases with fewer than {CHART_MIN_LABELED} labeled issues are in the tables only"])
    ).configure_view(stroke=None)


def html(rep: ReleaseReport, chart_html: str) -> str:
    """The chart's page, with a table per engine and the flags under it."""
    body = ["<h1>RE classes per release</h1>"]
    for e, r, f in rep.flags:
        body.append(f"<p><b>{escape(flag_line(e.name, r, f))}</b></p>")
    tail = ["<table border=1 cellspacing=0 cellpadding=3><tr>" + "".join(f"<th>{escape(h)}</th>" for h in header(rep))
            + "</tr>" + "".join("<tr>" + "".join(f"<td>{escape(str(v))}</td>" for v in row) + "</tr>"
                                for row in rows(rep)) + "</table>", f"<p>{escape(caption(rep))}</p>"]
    page = chart_html.replace("<body>", "<body>\n" + "".join(body), 1)
    i = page.rindex("</body>")
    return page[:i] + "\n".join(tail) + "\n" + page[i:]
