"""Rich panel for a TriageResult."""

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


def triage_panel(r) -> Panel:
    parts: list = []
    head = Table.grid(padding=(0, 2))
    head.add_column(style="dim")
    head.add_column()
    cls = f"[bold]{r.re_class}[/] ({r.re_confidence:.2f})" + (" [yellow]unsure[/]" if r.abstained else "")
    head.add_row("class", cls)
    head.add_row("component", f"[bold]{r.component}[/] ({r.component_confidence:.2f})")
    head.add_row("model", f"[dim]{r.model_version} · "
                 f"{'fast path (static MiniLM)' if r.fast_path else 'full model (MiniLM)'}[/]")
    head.add_row("engine", f"{_engine_name(r.engine)} [dim]— {r.engine_reason}[/]")
    if r.exception:
        head.add_row("exception", Text(r.exception[:300]))
    if r.frames:
        head.add_row("last frames", Text("\n".join(r.frames[-3:])))
    if r.disagreement:
        head.add_row("note", f"[yellow]{r.disagreement}[/]")
    for n in r.notes:
        head.add_row("input", f"[dim]{n}[/]")
    parts.append(head)

    if r.evidence:
        ev = Text("\nevidence\n", style="bold")
        for line in r.evidence:
            ev.append("  ▶ ", style="red")
            ev.append(line + "\n", style="bold red")
        parts.append(ev)

    if r.fixes:
        for i, f in enumerate(r.fixes):
            t = Text()
            t.append(f"\n{'fix' if i == 0 else 'also matches'}: {f['title']}", style="bold green" if i == 0 else "green")
            t.append(f"  [{f['tag']} · rule {f['id']}]\n", style="dim")
            if i == 0:
                for n, step in enumerate(f["steps"], 1):
                    t.append(f"  {n}. {step}\n")
                for c in f["caveats"][:2]:
                    t.append(f"  ! {c}\n", style="yellow")
                for s in f["sources"][:3]:
                    t.append(f"  source: {s}\n", style="blue")
            parts.append(t)
    else:
        parts.append(Text("\nno known-fix rule matched this log", style="dim"))

    if r.similar:
        t = Table(title="similar past issues", title_justify="left", expand=True)
        for col in ("issue", "score", "state", "title", "fixing PR", "known fix"):
            t.add_column(col, ratio=1 if col == "title" else None)
        for s in r.similar:
            prs = ", ".join(f"#{n}" for n in s.get("fixed_by") or []) or "-"
            t.add_row(format_ref(s["repo"], s["number"]), f"{s['score']:.2f}", s["state"] or "",
                      f"[link={s['html_url']}]{s['title'] or ''}[/link]\n[dim]{s['html_url']}[/]", prs,
                      s.get("known_fix") or "")
        parts.append(t)
    return Panel(Group(*parts), title="[bold]retriage classify[/]", expand=True)
