"""Rich rendering of library results for the terminal. No logic beyond layout lives here."""

from __future__ import annotations

from rich.console import Group

from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from retriage.core.console import visible


def _date(value) -> str:
    return value.strftime("%Y-%m-%d") if value else "-"


def issue_panel(info: dict, body_chars: int = 600) -> Panel:
    """`retriage show` on a terminal: the issue's parts in a panel, the similar issues as a table at the end."""
    parts = issue_parts(info, body_chars)
    if info.get("similar"):
        parts += [Text(""), similar_table(info["similar"])]
    return Panel(Group(*parts), title=f"[bold]{info['ref']}[/]", expand=True)


def issue_plain(info: dict, body_chars: int = 600) -> str:
    """`retriage show` off a terminal: the same parts as plain text, lines whole (no panel, no wrapping), then the
    similar issues as tab-separated rows with a header."""
    import io

    from rich.console import Console

    from retriage.core.console import plain_cell

    buf = io.StringIO()
    Console(file=buf, width=100000, color_system=None, force_terminal=False, highlight=False,
            soft_wrap=True).print(Group(Text(info["ref"], style="bold"), *issue_parts(info, body_chars)))
    lines = [ln.rstrip() for ln in buf.getvalue().splitlines()]
    if info.get("similar"):
        header, rows = similar_plain(info["similar"])
        lines += ["", "similar issues"] + ["\t".join(plain_cell(c) for c in row) for row in [header, *rows]]
    from retriage.core.console import visible

    return visible("\n".join(lines)) + "\n"


def issue_parts(info: dict, body_chars: int = 600) -> list:
    issue = info["issue"]
    head = Text()
    head.append(f"{issue['title'] or '(no title)'}\n", style="bold")
    state_style = "green" if issue["state"] == "open" else "magenta"
    kind = "pull request" if issue["is_pull_request"] else "issue"
    head.append(f"{kind} · ", style="dim")
    head.append(issue["state"] or "?", style=state_style)
    head.append(f" · created {_date(issue['created_at'])}", style="dim")
    if issue["closed_at"]:
        head.append(f" · closed {_date(issue['closed_at'])}", style="dim")
    n = issue["comments"]
    head.append(f" · {n} comment{'' if n == 1 else 's'}\n" if n is not None else "\n", style="dim")
    if issue["labels"]:
        head.append("labels: ", style="dim")
        head.append(", ".join(issue["labels"]) + "\n", style="cyan")
    head.append(issue["html_url"] or "", style="blue underline")
    parts: list = [head]

    pred = info.get("prediction")
    gold = info.get("gold")
    fix = info.get("correction")
    table = Table.grid(padding=(0, 2))
    table.add_column(style="dim")
    table.add_column()
    if fix:  # a correction overrides the prediction; the model's answer stays visible below it
        table.add_row("class", f"[bold]{fix['re_class']}[/] (corrected)")
        table.add_row("component", f"[bold]{fix['component']}[/] (corrected)")
        table.add_row("known fixes", fix["known_fix"] if fix["known_fix"] != "none" else "-")
        more = f"; {fix['corrections']} corrections recorded" if fix.get("corrections", 1) > 1 else ""
        table.add_row("corrected", f"by {fix['corrected_by']} on {_date(fix['corrected_at'])}: {fix['reason']}{more}")
        if pred:
            cls = pred["re_class"] + (" (unsure)" if pred.get("abstained") else "")
            table.add_row("model said", f"{cls} conf {pred['confidence']:.2f} / {pred['component']} / "
                          f"fixes {', '.join(pred.get('known_fixes') or []) or '-'} ({pred['model_version']})")
            _provenance(table, pred)
    elif pred:
        cls = pred["re_class"] + (" (unsure)" if pred.get("abstained") else "")
        table.add_row("predicted class", f"[bold]{cls}[/] conf {pred['confidence']:.2f}")
        comp_conf = pred.get("component_confidence")
        table.add_row("component", f"[bold]{pred['component']}[/]" + (f" conf {comp_conf:.2f}" if comp_conf else ""))
        table.add_row("known fixes", ", ".join(pred.get("known_fixes") or []) or "-")
        table.add_row("model", str(pred["model_version"]))
        _provenance(table, pred)
    elif info.get("source"):
        table.add_row("known from", info["source"])
    else:
        table.add_row("predicted class", "not labeled yet (run `retriage label`)")
    if gold:
        table.add_row("team label", f"{gold['re_class']} / {gold['component']} / fix {gold['known_fix']}"
                      + (f" — {gold['reason']}" if gold.get("reason") else ""))
    links = info.get("links") or {}
    if links.get("fixed_by"):
        table.add_row("fixed by PR", ", ".join(f"#{n}" for n in links["fixed_by"]))
    if links.get("fixes"):
        table.add_row("fixes", ", ".join(f"#{n}" for n in links["fixes"]))
    if info.get("reported_on"):  # the engine version (db/versions.py)
        table.add_row("version", Text(info["reported_on"]))
    parts += [Text(""), table]
    if info.get("advice"):
        parts += [Text(""), advice_text(info["advice"])]

    from retriage.core.textprep import for_reading

    body = for_reading(issue["body"] or "", body_chars * 2).strip()  # templates and environment dumps dropped
    if body:
        snippet = body[:body_chars] + (" …" if len(body) > body_chars else "")
        parts += [Text(""), Text(snippet, style="white")]
    return parts


def _provenance(table: Table, pred: dict) -> None:
    """How the prediction was made (classifier/decision.py), and why a resource fix is missing or to be checked."""
    table.add_row("made by", Text(pred.get("made_by") or "not recorded (labeled before schema version 4)"))
    if pred.get("note"):
        table.add_row("note", Text(pred["note"], style="yellow"))


def advice_text(advice: list[dict]) -> Text:
    """The fix steps for the issue's engine, as the bot words them (retriage/bot/comment.py): the first matching
    rule's in full, the others by title; or the model's fix where no rule matched."""
    out = Text()
    first = advice[0]
    heading = ("known fix" if first.get("source") == "rule"
               else "possible fix (the model's; no rule matched)")
    out.append(f"{heading}: ", style="bold")
    out.append(f"{first['title']} (rule {first['id']}, fix {first['tag']})\n")
    for n, step in enumerate(first["steps"], 1):
        out.append(f"  {n}. {' '.join(step.split())}\n")
    for caveat in first["caveats"][:2]:
        out.append(f"  > {' '.join(caveat.split())}\n", style="dim")
    if first.get("line"):
        out.append("  matched: ", style="dim")
        out.append(" ".join(first["line"].split())[:200] + "\n", style="dim")
    if len(advice) > 1:
        out.append("also matches: ", style="dim")
        out.append("; ".join(f"{a['title']} ({a['id']})" for a in advice[1:]) + "\n", style="dim")
    out.rstrip()
    return out


def similar_table(rows: list[dict], title: str = "similar issues") -> Table:
    """Similar issues on a terminal: the title wrapped (never cut) and given the room; the issue's state under its
    reference and its fixing PRs under its known fix, so that the fixed-width cells leave the title room at 80
    columns."""
    t = Table(title=title, title_justify="left", expand=True, show_lines=False)
    t.add_column("issue", no_wrap=True)
    t.add_column("score", justify="right", no_wrap=True)
    t.add_column("title", ratio=1, min_width=20, overflow="fold")
    t.add_column("fix / PR", max_width=24, overflow="fold")
    from retriage.core.refs import format_ref

    for r in rows:
        link = f"link {r['html_url']}" if r.get("html_url") else ""
        ref = Text(format_ref(r["repo"], r["number"]), style=link)
        if r.get("state"):
            ref.append(f"\n{r['state']}", style="dim")
        prs = fixing_prs(r)
        fix = (r.get("known_fix") or "-") + (f"\nPR {prs}" if prs != "-" else "")
        t.add_row(ref, f"{r['score']:.2f}", Text(r.get("title") or ""), Text(fix.replace(", ", ",\n")))
    return t


def similar_plain(rows: list[dict]) -> tuple[list[str], list[list]]:
    """Similar issues off a terminal: (header, rows), the URL last."""
    from retriage.core.refs import format_ref

    return (["issue", "score", "state", "title", "fixing_pr", "known_fix", "url"],
            [[format_ref(r["repo"], r["number"]), f"{r['score']:.2f}", r.get("state") or "", r.get("title") or "",
              fixing_prs(r), r.get("known_fix") or "", r.get("html_url") or ""] for r in rows])


def fixing_prs(r: dict) -> str:
    """A similar issue's linked fixing PRs ("closed" alone is not "fixed")."""
    return ", ".join(f"#{n}" for n in r.get("fixed_by") or []) or "-"


def stats_table(s: dict) -> Table:
    t = Table(title="retriage database", title_justify="left")
    for col in ("repo", "issues", "PRs", "created from", "to", "labeled"):
        t.add_column(col, justify="right" if col in ("issues", "PRs", "labeled") else "left")
    for r in s["repos"]:
        t.add_row(r["repo"], str(r["issues"]), str(r["pull_requests"]), _date(r["first_created"]),
                  _date(r["last_created"]), f"{r['labeled']} ({r['share_labeled']:.0%})")
    t.add_row("[bold]all[/]", f"[bold]{s['issues']}[/]", str(s["pull_requests"]), "", "",
              f"{s['labeled']} ({s['share_labeled']:.0%})")
    t.caption = f"{s['comments']} comments · {s['gold_labels']} team labels · model {s['model_version'] or '-'}"
    return t


def stats_plain(s: dict) -> tuple[list[str], list[list]]:
    """`retriage stats` off a terminal: one row per repository and one for all (no caption: --json has it)."""
    rows = [[r["repo"], r["issues"], r["pull_requests"], _date(r["first_created"]), _date(r["last_created"]),
             r["labeled"], f"{r['share_labeled']:.2f}"] for r in s["repos"]]
    rows.append(["all", s["issues"], s["pull_requests"], "", "", s["labeled"], f"{s['share_labeled']:.2f}"])
    return ["repo", "issues", "prs", "created_from", "created_to", "labeled", "share_labeled"], rows




def _issue_fields(rows: list[dict]) -> tuple[list[str], list[str], list[str]]:
    """Each row's reference, class cell (`unsure`, `*` when corrected) and fixes (`?` beside none: worth checking)."""
    from retriage.core.refs import format_ref
    from retriage.taxonomy import fix_tag_classes

    implied = fix_tag_classes()
    refs = [format_ref(r["repo"], r["number"]) for r in rows]
    classes = [("unsure" if r["abstained"] else r["re_class"]) + ("*" if r.get("corrected") else "") for r in rows]
    fixes = [[f + ("?" if r["re_class"] == "none" and f in implied and not r.get("corrected") else "")
              for f in r["known_fixes"] or []] for r in rows]
    return refs, classes, fixes


MIN_TITLE = 30  # the title column's width below which `list` stacks its other columns (two lines a row)


def issues_table(rows: list[dict], width: int = 80) -> Table:
    """`retriage list` and `search` on a terminal: one row per issue, the title wrapped (never cut, never
    dropped), references, numbers and fix tags whole. Where the title would get fewer than MIN_TITLE columns,
    state and date go under the reference and the component under the class. The full URL is a hyperlink on
    the reference (and in the plain output, --json and --format)."""
    from rich import box

    refs, classes, fixes = _issue_fields(rows)
    scored = bool(rows) and "score" in rows[0]  # `retriage search`: the score after the issue
    t = Table(title=f"{len(rows)} issue{'' if len(rows) == 1 else 's'}", title_justify="left", box=box.SIMPLE_HEAD,
              pad_edge=False, expand=True)
    captions = (["* corrected with `retriage relabel` (class, component and fix as corrected)"]
                if any(r.get("corrected") for r in rows) else [])
    if any(f.endswith("?") for tags in fixes for f in tags):
        captions.append("? a resource fix beside the class none: worth checking (`retriage show` says why)")
    if captions:
        t.caption, t.caption_justify = "\n".join(captions), "left"
    longest = (lambda cells, least: max([len(c) for c in cells] + [least]))
    fix_cells = [", ".join(tags) or "-" for tags in fixes]
    wide = {"issue": longest(refs, 5), **({"score": 5} if scored else {}), "state": 6, "created": 10,
            "class": longest(classes, 5), "conf": 4, "component": longest([r["component"] for r in rows], 9),
            "fixes": longest(fix_cells, 5)}
    stacked = width - (sum(wide.values()) + 2 * len(wide)) < MIN_TITLE
    if stacked:
        fix_cells = ["\n".join(tags) or "-" for tags in fixes]
        cols = {"issue": longest(refs + [f"{r['state']} 2000-01-01" for r in rows], 5),
                **({"score": 5} if scored else {}),
                "class": longest([f"{c} 0.00" for c in classes] + [r["component"] for r in rows], 5),
                "fixes": max([len(f) for tags in fixes for f in tags] + [5])}
    else:
        cols = wide
    for col, w in cols.items():
        t.add_column(col, justify="right" if col in ("conf", "score") else "left", min_width=w, no_wrap=True)
    t.add_column("title", ratio=1, min_width=12, overflow="fold")
    for ref, cls, fix, r in zip(refs, classes, fix_cells, rows):
        link = Text().append(ref, style=f"link {r['html_url']}" if r.get("html_url") else "")
        score = [f"{r['score']:.2f}"] if scored else []
        if stacked:
            link.append(f"\n{r['state']} {_date(r['created_at'])}", style="dim")
            cells = [link, *score, Text(f"{cls} {r['confidence']:.2f}\n{r['component']}"), fix]
        else:
            cells = [link, *score, r["state"], _date(r["created_at"]), cls, f"{r['confidence']:.2f}", r["component"], fix]
        t.add_row(*cells, Text(r["title"] or ""))
    return t


def issues_plain(rows: list[dict]) -> tuple[list[str], list[list]]:
    """`retriage list` and `search` off a terminal: (header, rows), every value whole, the URL last."""
    refs, classes, fixes = _issue_fields(rows)
    scored = bool(rows) and "score" in rows[0]
    header = ["issue", *(["score"] if scored else []), "state", "created", "class", "conf", "component", "fixes",
              "title", "url"]
    out = [[ref, *([f"{r['score']:.2f}"] if scored else []), r["state"], _date(r["created_at"]), cls,
            f"{r['confidence']:.2f}", r["component"], ",".join(tags) or "-", r["title"] or "", r.get("html_url") or ""]
           for ref, cls, tags, r in zip(refs, classes, fixes, rows)]
    return header, out


def write_rows(rows: list[dict], fmt: str, columns: tuple[str, ...] | None = None) -> None:
    """Rows as JSON lines (`ndjson`) or CSV on stdout (lists joined by `;`, times as ISO strings); `columns`
    default to those of `retriage list`."""
    import csv
    from retriage.core.output import dumps
    import sys

    from retriage.db.queries import LIST_COLUMNS

    cols = columns or LIST_COLUMNS

    def flat(v):
        if isinstance(v, list):
            return ";".join(v) if fmt == "csv" else v
        return v.isoformat() if hasattr(v, "isoformat") else v

    if fmt == "ndjson":
        for r in rows:
            sys.stdout.write(dumps({k: flat(r[k]) for k in cols}, ensure_ascii=False) + "\n")
        return
    w = csv.writer(sys.stdout)
    w.writerow(cols)
    for r in rows:
        w.writerow([visible(flat(r[k])) for k in cols])  # no raw ESC, NUL or bidi override in a cell
