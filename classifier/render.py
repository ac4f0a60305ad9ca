"""Rich tables for training and evaluation results."""

from __future__ import annotations

from rich.table import Table


def scores_table(target: str, systems: dict) -> Table:
    """Macro-F1 and per-class F1 of each system side by side (systems: name -> Scores)."""
    first = next(iter(systems.values()))
    t = Table(title=f"{target}: macro-F1 and per-class F1 (P/R)", title_justify="left")
    t.add_column("system")
    t.add_column("macro-F1", justify="right")
    for label in first.labels:
        t.add_column(f"{label} (n={first.per_class[label]['support']})", justify="right")
    for name, s in systems.items():
        cells = []
        for label in first.labels:
            pc = s.per_class.get(label)
            cells.append(f"{pc['f1']:.2f} ({pc['precision']:.2f}/{pc['recall']:.2f})" if pc else "-")
        t.add_row(name, f"[bold]{s.macro_f1:.3f}[/]" if name == "model" else f"{s.macro_f1:.3f}", *cells)
    return t


def confusion_table(target: str, s) -> Table:
    t = Table(title=f"{target}: confusion (rows true, columns predicted)", title_justify="left")
    t.add_column("true \\ pred")
    for label in s.labels:
        t.add_column(label, justify="right")
    for label, row in zip(s.labels, s.confusion):
        t.add_row(label, *[str(x) for x in row])
    return t


def eval_report(console, report) -> None:
    console.print(f"gold: {report.source} · {report.n} issues · baselines trained on {report.n_train} · "
                  f"model {report.model_version} · coverage {report.coverage:.0%} (rest abstained as unsure)")
    for target, systems in report.scores.items():
        console.print(scores_table(target, systems))
        console.print(confusion_table(target, systems["model"]))
        if target in report.confident:
            c = report.confident[target]
            console.print(f"model on the {report.coverage:.0%} it does not abstain on: macro-F1 {c.macro_f1:.3f}, "
                          f"accuracy {c.accuracy:.3f}")
