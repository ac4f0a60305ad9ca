"""Rich rendering of a TriageResult: a panel that reads at 80 columns, then the links below it.

URLs are never put inside the panel, where a narrow terminal would wrap or cut them: the sources of the fix and
the similar issues are printed after it, one URL per line, whole (and as terminal hyperlinks where supported).
"""

from __future__ import annotations

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from retriage.core.refs import format_ref
from retriage.taxonomy import engines



def _engine_name(engine_id: str | None) -> str:
    for e in engines():
        if e.id == engine_id:
            return e.name
    return "unknown engine"


def _hanging(rows: list[tuple[str, str, str, str]]) -> Table:
    """Marked lines whose continuation lines stay indented under the text: (mark, style, text, style)."""
    g = Table.grid(padding=(0, 1))
    g.add_column(no_wrap=True)
    g.add_column()
    for mark, mark_style, text, text_style in rows:
        g.add_row(Text(mark, style=mark_style), Text(text, style=text_style))
    return g


def _class_line(r) -> Text:
    t = Text()
    t.append(r.re_class, style="bold")
    if r.class_source == "rule" and r.class_rule:
        cr = r.class_rule
        t.append(f" (rule {cr['id']}: precision {r.re_confidence:.2f}, right on {cr['right']} of {cr['traces']} "
                 "labeled traces)")
        mc = r.model_class or {}
        if mc:
            t.append(f"; model alone: {mc['re_class']} ({mc['re_confidence']:.2f})", style="dim")
    else:
        t.append(f" ({r.re_confidence:.2f})")
        if r.abstained:
            t.append(" unsure", style="yellow")
    return t


def _links(r) -> Text | None:
    urls = []
    if r.fixes:
        urls += [("source", s) for s in r.fixes[0]["sources"][:4]]
    urls += [(format_ref(s["repo"], s["number"]), s["html_url"]) for s in r.similar if s.get("html_url")]
    if not urls:
        return None
    t = Text()
    for label, url in urls:
        t.append(f"{label}: ", style="dim")
        t.append(url, style=f"blue link {url}")
        t.append("\n")
    t.rstrip()
    return t


def triage_panel(r) -> Group:
    parts: list = []
    head = Table.grid(padding=(0, 2))
    head.add_column(style="dim", no_wrap=True)
    head.add_column()
    head.add_row("class", _class_line(r))
    head.add_row("component", f"[bold]{r.component}[/] ({r.component_confidence:.2f})")
    head.add_row("engine", Text(_engine_name(r.engine)).append(f" — {r.engine_reason}", style="dim"))
    if r.environment:
        head.add_row("environment", Text(r.environment["summary"]))
    head.add_row("model", f"[dim]{r.model_version} · "
                 f"{'fast path (static MiniLM)' if r.fast_path else 'full model (MiniLM)'}[/]")
    if r.exception:
        head.add_row("exception", Text(r.exception[:300]))
    if r.frames:
        head.add_row("last frames", Text("\n".join(r.frames[-3:])))
    if r.disagreement:
        head.add_row("why", Text(r.disagreement, style="yellow"))
    for n in r.notes:
        head.add_row("input", Text(n, style="dim"))
    parts.append(head)

    if r.evidence:
        parts.append(Text("\nevidence", style="bold"))
        parts.append(_hanging([("  ▶", "red", line, "bold red") for line in r.evidence]))

    if r.fixes:
        for i, f in enumerate(r.fixes):
            t = Text()
            first = "fix worth checking" if getattr(r, "fix_worth_checking", False) else "fix"
            t.append(f"\n{first if i == 0 else 'also matches'}: {f['title']}",
                     style="bold green" if i == 0 else "green")
            t.append(f"  [{f['tag']} · rule {f['id']}]", style="dim")
            parts.append(t)
            if i == 0:
                rows = [(f"  {n}.", "", step, "") for n, step in enumerate(f["steps"], 1)]
                rows += [("  !", "yellow", c, "yellow") for c in f["caveats"][:3]]
                parts.append(_hanging(rows))
    else:
        parts.append(Text("\nno known-fix rule matched this log", style="dim"))

    if r.similar:
        t = Table(title="similar past issues", title_justify="left", expand=True)
        for col in ("issue", "score", "state", "title", "fixing PR", "known fix"):
            t.add_column(col, ratio=1 if col == "title" else None, no_wrap=col != "title")
        for s in r.similar:
            prs = ", ".join(f"#{n}" for n in s.get("fixed_by") or []) or "-"
            t.add_row(f"[link={s['html_url']}]{format_ref(s['repo'], s['number'])}[/link]", f"{s['score']:.2f}",
                      s["state"] or "", Text(s["title"] or ""), prs, s.get("known_fix") or "")
        parts.append(t)
    out: list = [Panel(Group(*parts), title="[bold]retriage classify[/]", expand=True)]
    links = _links(r)
    if links is not None:
        out.append(links)
    return Group(*out)


def print_result(console, r) -> None:
    """The panel, then the links on lines of their own that the terminal never wraps or cuts (soft wrap)."""
    g = triage_panel(r)
    panel, *rest = g.renderables
    console.print(panel)
    for part in rest:
        console.print(part, soft_wrap=True, overflow="ignore", crop=False)
