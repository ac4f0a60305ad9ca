"""Rich tables for training and evaluation results."""

from __future__ import annotations

from rich.table import Table

from retriage.core.console import print_table


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
                  f"model {report.model_version}"
                  + (f" (scored here by its fit without the dev split, {report.scored_by})"
                     if report.scored_by and report.scored_by != report.model_version else "")
                  + f" · coverage {report.coverage:.0%} (rest abstained as unsure)")
    if report.seen_in_training:
        console.print(f"{report.seen_in_training} of the {report.n} gold issues are labeled issues the model was "
                      "fitted on: its figures on them are optimistic (baselines are fitted without them)")
    for target, systems in report.scores.items():
        print_table(console, scores_table(target, systems))
        print_table(console, confusion_table(target, systems["model"]))
        if target in report.confident:
            c = report.confident[target]
            console.print(f"model on the {report.coverage:.0%} it does not abstain on: macro-F1 {c.macro_f1:.3f}, "
                          f"accuracy {c.accuracy:.3f}")
    for g in [report.summary] + report.generalisation if report.summary else report.generalisation:
        print_table(console, generalisation_table(g))


def generalisation_table(g) -> Table:
    """One split: each system's RE macro-F1 with its 95 % interval, per-class F1, resource-bug detection,
    component macro-F1 and known-fix precision/recall (fits 80 columns)."""
    sources = ", ".join(f"{n} {k}" for k, n in sorted(g.test_sources.items()))
    t = Table(title=f"{g.name}: {g.description}; {g.n_train} train, {g.n_test} test ({sources})",
              title_justify="left")
    for col in ("system", "RE F1", "95% CI", "F1 RE.1/2/3/4/none", "res. P/R", "comp F1", "fix P/R"):
        t.add_column(col, justify="left" if col == "system" else "right", no_wrap=True)
    for name, s in g.systems.items():
        lo, hi = s.re_interval
        f1 = f"[bold]{s.re_macro_f1:.3f}[/]" if name == "model" else f"{s.re_macro_f1:.3f}"
        fix = "-" if s.fix_recall is None or s.fix_recall["recall"] is None else \
            f"{s.fix_recall.get('precision') or 0:.2f}/{s.fix_recall['recall']:.2f}"
        per = " ".join(f"{s.re_per_class_f1[c]:.2f}" if c in s.re_per_class_f1 else " -  "
                       for c in ("RE.1", "RE.2", "RE.3", "RE.4", "none"))
        t.add_row(name.replace("_", " "), f1, f"{lo:.2f}-{hi:.2f}", per,
                  f"{s.detection['precision']:.2f}/{s.detection['recall']:.2f}", f"{s.component_macro_f1:.3f}", fix)
    engines = "; ".join(f"{e} n={d['n']}: RE F1 {d['re_macro_f1']:.2f} ({d['re_macro_f1_95ci'][0]:.2f}-"
                        f"{d['re_macro_f1_95ci'][1]:.2f}), P/R {d['detection']['precision']:.2f}/"
                        f"{d['detection']['recall']:.2f}" for e, d in g.per_engine.items())
    counted = g.systems["model"].counted if "model" in g.systems else None
    t.caption = f"model per engine: {engines}" + (
        f"\nmodel's resource bugs as counted (unsure set aside): P/R {counted['precision']:.2f}/"
        f"{counted['recall']:.2f}, {counted['unsure']} of {g.n_test} unsure" if counted else "")
    t.caption_justify = "left"
    return t
