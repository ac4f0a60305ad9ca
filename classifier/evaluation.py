"""`retriage eval`: the model and the baselines scored on the same gold issues. The model's answers are its
decisions (classifier/decision.py, through generalisation.decided_answers), as `label`, `predict` and `show` give
them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from retriage.classifier import metrics
from retriage.classifier.dataset import Example, load_gold, snapshot_index, split
from retriage.classifier.embedding_cache import embed_views
from retriage.classifier.features import Views, views
from retriage.classifier.generalisation import (answered_split, baseline_answers, decided_answers, evaluate_split,
                                                remembered_answers)
from retriage.classifier.result_cache import examples_material
from retriage.core.errors import UsageError
from retriage.core.textfile import read_text
from retriage.db.records import RecordError, issue_number, repo_of, text_field
from retriage.taxonomy import component_ids, re_class_ids

TARGETS = ("re_class", "component")


@dataclass
class EvalReport:
    source: str
    n: int
    n_train: int
    model_version: str | None
    coverage: float
    scored_by: str | None = None  # the version of the model that answered (on the dev split: the held-out fit)
    seen_in_training: int = 0  # --gold issues that are among the labeled issues the model was fitted on
    scores: dict = field(default_factory=dict)  # target -> {system -> Scores}
    confident: dict = field(default_factory=dict)  # target -> Scores on the issues the model did not abstain on
    generalisation: list = field(default_factory=list)  # generalisation.SplitReport per split
    summary: object = None  # the same figures as the generalisation splits, for the dev split (or --gold)

    def to_dict(self) -> dict:
        return {"gold": self.source, "n": self.n, "n_train": self.n_train, "model_version": self.model_version,
                "scored_by": self.scored_by, "seen_in_training": self.seen_in_training, "coverage": self.coverage,
                "scores": {t: {k: v.to_dict() for k, v in d.items()} for t, d in self.scores.items()},
                "model_when_confident": {t: v.to_dict() for t, v in self.confident.items()},
                "summary": self.summary.to_dict() if self.summary else None,
                "generalisation": [g.to_dict() for g in self.generalisation]}


def _gold_line(line: str, path: Path, n: int, classes: set, comps: set) -> dict:
    """One gold line, checked: every failure is a one-line UsageError at FILE:LINE."""
    try:
        r = json.loads(line)
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}:{n}: not valid JSON: {e.msg}") from None
    except (RecursionError, ValueError):
        raise UsageError(f"{path}:{n}: not usable JSON (nested too deeply or a number too long)") from None
    if not isinstance(r, dict):
        raise UsageError(f"{path}:{n}: not a gold label line (a JSON object with repo, number, re_class, component)")
    try:
        repo = repo_of(r)
        if repo is None:
            raise RecordError("missing repo (owner/name)")
        r["repo"], r["number"] = repo, issue_number(r.get("number"))
        for key in ("title", "body", "text", "html_url", "known_fix"):
            text_field(r.get(key), key)
    except RecordError as e:
        raise UsageError(f"{path}:{n}: {e}") from None
    if not isinstance(r.get("re_class"), str) or not isinstance(r.get("component"), str) \
            or r["re_class"] not in classes or r["component"] not in comps:
        raise UsageError(f"{path}:{n}: unknown re_class or component")
    return r


def read_gold(path: Path, con=None) -> list[Example]:
    snap = snapshot_index()
    out = []
    classes, comps = set(re_class_ids()), set(component_ids())
    lines = read_text(path).split("\n")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        r = _gold_line(line, path, n, classes, comps)
        repo, number, re_class, component = r["repo"], r["number"], r["re_class"], r["component"]
        title, body = r.get("title"), r.get("body") if "body" in r else r.get("text")
        source = "real" if "body" in r else "external"  # the form of record, as in the labeled set
        if title is None and body is None:
            row = None
            if con is not None:
                row = con.execute("SELECT title, body FROM issues WHERE repo = ? AND number = ?", [repo, number]).fetchone()
                source = "database"
            if row is None and (repo, number) in snap:
                row, source = (snap[(repo, number)]["title"], snap[(repo, number)]["body"]), "corpus"
            if row is None:
                raise UsageError(f"{path}:{n}: no text for {repo}#{number} (give title/body, or import the issue)")
            title, body = row
        out.append(Example(repo, number, r.get("html_url", ""), title or "", body or "", re_class, component,
                           r.get("known_fix", "none"), source=source))
    if not out:
        raise UsageError(f"{path}: no gold labels")
    return out


def cached_embedder(con) -> Callable[[list[Views]], list]:
    """View embeddings through `con`'s cache, or, without a database, through the package's shipped vectors (the
    snapshot and the labeled set) held in memory, so that only texts nobody embedded are embedded."""
    if con is not None:
        return lambda v: embed_views(con, v)
    from retriage.classifier.snapshot_cache import shipped_embedder

    return shipped_embedder()


def model_answers(model, gold: list[Example], embed, view_of) -> dict:
    """The shipped (or given) model's decisions on `gold` (generalisation.decided_answers) — remembered by a hash
    of the model's version, the issues and the code (classifier/result_cache.py)."""
    def compute() -> dict:
        gold_views = [view_of(e) for e in gold]
        return decided_answers(model, gold, gold_views, embed(gold_views))

    return remembered_answers("model", {"model": model.version, "gold": examples_material(gold)}, compute, len(gold))


def run_eval(gold_path: Path | None, db: str | None = None, generalisation: bool = True,
             step: Callable[[str], None] | None = None, advance: Callable[[], None] | None = None,
             model_dir: str | None = None, holdout: bool = True) -> EvalReport:
    """The dev split (or a --gold file) scored by the shipped model beside the baselines (the dev split by its
    held-out fit, when the model was refitted on the dev split too: `IssueClassifier.held_out`); with `generalisation`
    (and no --gold), the future and new-engine splits too (see classifier/generalisation.py), and with `holdout`
    the issues of taxonomy/holdout/ scored by the model as it is, under its own abstain threshold. `step` is told
    what is being done (a short phrase) as each stage starts; `advance` is called as each split is done (the dev
    split or --gold, then each generalisation split)."""
    step = step or (lambda _: None)
    advance = advance or (lambda: None)
    con = None
    if db or Path("retriage.duckdb").exists():
        from retriage.db.store import Database

        con = Database(db)  # the embedding cache, held only while a chunk of vectors is written
    team = load_gold()  # no phase line before it: a bad --gold file is one line of error and nothing else
    if gold_path is None:
        train, gold = split(team)
        source = "dev split of the team's labeled set"
    else:
        gold = read_gold(gold_path, con)
        keys = {e.key for e in gold}
        train = [e for e in team if e.key not in keys]
        source = str(gold_path)
    from retriage.classifier.model import IssueClassifier

    model = IssueClassifier.load(model_dir)
    embed = cached_embedder(con)
    step(f"{source}: {len(gold)} issues")
    memo: dict[tuple[str, int], Views] = {}

    def view_of(e: Example) -> Views:
        if e.key not in memo:
            memo[e.key] = views(e.title, e.body)
        return memo[e.key]

    scorer = model.held_out() if gold_path is None else model  # the dev split: a fit that never saw it
    answers = model_answers(scorer, gold, embed, view_of)
    report = EvalReport(source, len(gold), len(train), model.version,
                        round(sum(not a for a in answers["abstained"]) / len(gold), 4), scored_by=scorer.version)
    if gold_path is not None:  # gold issues the model was fitted on (the labeled set, or its training side)
        fitted = team if model.meta.get("refit_on_dev") else split(team)[0]
        report.seen_in_training = len({e.key for e in gold} & {e.key for e in fitted})
    step(f"{source}: baselines")
    predicted = {"model": {t: answers[t] for t in TARGETS}, **baseline_answers(train, gold, view_of)}
    for target in TARGETS:
        labels = metrics.labels_for(target)
        y = [getattr(e, target) for e in gold]
        report.scores[target] = {name: metrics.score(y, a[target], labels) for name, a in predicted.items()}
        kept = [i for i, a in enumerate(answers["abstained"]) if not a]
        if kept:
            report.confident[target] = metrics.score([y[i] for i in kept], [answers[target][i] for i in kept], labels)
    report.summary = answered_split("dev" if gold_path is None else "gold", source, len(train), gold, answers,
                                    predicted)
    advance()
    if generalisation and gold_path is None:
        from retriage.classifier.splits import generalisation_splits

        for sp in generalisation_splits(team):
            report.generalisation.append(evaluate_split(sp, embed, model.meta["hyperparameters"], step, view_of,
                                                        threshold=model.threshold))
            advance()
        held = holdout_examples(team) if holdout else []
        if held:  # the model as shipped (nothing refitted) beside the baselines fitted on the whole labeled set
            step(f"holdout: {len(held)} issues")
            answers = model_answers(model, held, embed, view_of)
            step("holdout: baselines")
            report.generalisation.append(answered_split(
                "holdout", "issues kept out of every fit (taxonomy/holdout/), scored by the model as it is", len(team),
                held, answers, {"model": answers, **baseline_answers(team, held, view_of)}))
            advance()
    return report


def holdout_examples(team: list[Example]) -> list[Example]:
    """The issues of taxonomy/holdout/ (labeled like the rest, read by no fit), less any that the labeled set
    also holds (none, by the label tests; a user's labels could)."""
    from retriage.taxonomy import HOLDOUT_DIR

    if not HOLDOUT_DIR.is_dir():
        return []
    fitted = {e.key for e in team}
    return [e for e in load_gold(HOLDOUT_DIR) if e.key not in fitted]


SYSTEM_NAMES = {"model": "model", "tfidf_logreg": "TF-IDF + LR", "keyword_rules": "keyword rules",
                "majority": "majority"}


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _row(*cells) -> str:
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _table(head: list[str], rows: list[list]) -> list[str]:
    return [_row(*head), _row(*["---"] * len(head)), *(_row(*r) for r in rows), ""]


def markdown(report: EvalReport) -> str:
    """The tables `retriage eval` prints, as Markdown (`eval --markdown PATH`; `make figures` writes
    docs/evaluation.md with it): every split it scored, each system's RE macro-F1 with its 95 % interval."""
    splits = ([report.summary] if report.summary else []) + report.generalisation
    by = f"; the {report.summary.name if report.summary else 'gold'} issues scored by its fit without the dev " \
         f"split, `{report.scored_by}`" if report.scored_by and report.scored_by != report.model_version else ""
    out = ["# Evaluation", "",
           "Written by `retriage eval --markdown PATH` (`make figures`); regenerate it rather than edit it.", "",
           f"Model `{report.model_version}`{by}. Gold: {report.source}, {report.n} issues, coverage "
           f"{report.coverage:.0%} (the rest abstained as unsure). RE macro-F1 with its 95 % bootstrap interval "
           "(1,000 resamples of the issues); resource P/R is any RE class against `none`.", ""]
    out += _table(["split", "what", "train", "test", "test issues by form"],
                  [[g.name, g.description, g.n_train, g.n_test,
                    ", ".join(f"{n} {k}" for k, n in sorted(g.test_sources.items()))] for g in splits])
    rows = []
    for g in splits:
        for name, s in g.systems.items():
            fix = "-" if s.fix_recall is None or s.fix_recall["recall"] is None else \
                f"{s.fix_recall.get('precision') or 0:.2f}/{s.fix_recall['recall']:.2f} (n={s.fix_recall['n']})"
            per = " / ".join(f"{s.re_per_class_f1[c]:.2f}" if c in s.re_per_class_f1 else "-"
                             for c in ("RE.1", "RE.2", "RE.3", "RE.4", "none"))
            rows.append([g.name, SYSTEM_NAMES.get(name, name),
                         f"{s.re_macro_f1:.3f} ({s.re_interval[0]:.2f}–{s.re_interval[1]:.2f})", per,
                         f"{s.detection['precision']:.2f}/{s.detection['recall']:.2f}",
                         f"{s.component_macro_f1:.3f}", fix])
    out += _table(["split", "system", "RE macro-F1 (95 % CI)", "F1 RE.1 / RE.2 / RE.3 / RE.4 / none",
                   "resource P/R", "component macro-F1", "known-fix P/R"], rows)
    out += ["The model's resource-bug detection as the report and the bot count it (unsure answers set aside), "
            "and per engine:", ""]
    rows = []
    for g in splits:
        c = g.systems["model"].counted if "model" in g.systems else None
        engines = "; ".join(f"{e} (n={d['n']}) {d['re_macro_f1']:.2f} ({d['re_macro_f1_95ci'][0]:.2f}–"
                            f"{d['re_macro_f1_95ci'][1]:.2f}), P/R {d['detection']['precision']:.2f}/"
                            f"{d['detection']['recall']:.2f}" for e, d in g.per_engine.items())
        rows.append([g.name, f"{c['precision']:.2f}/{c['recall']:.2f}" if c else "-",
                     f"{c['unsure']} of {g.n_test}" if c else "-", engines])
    out += _table(["split", "counted P/R", "unsure", "per engine: RE macro-F1 (95 % CI), P/R"], rows)
    for target, systems in report.scores.items():
        labels = next(iter(systems.values())).labels
        out += [f"{report.summary.name if report.summary else 'gold'}, {target}: macro-F1 and per-class F1 "
                "(precision/recall)", ""]
        out += _table(["system", "macro-F1", *labels],
                      [[SYSTEM_NAMES.get(name, name), f"{s.macro_f1:.3f}",
                        *(f"{s.per_class[c]['f1']:.2f} ({s.per_class[c]['precision']:.2f}/"
                          f"{s.per_class[c]['recall']:.2f})" if c in s.per_class else "-" for c in labels)]
                       for name, s in systems.items()])
        m = systems["model"]
        out += [f"The model's confusion ({target}; rows true, columns predicted):", ""]
        out += _table(["true / predicted", *m.labels], [[c, *row] for c, row in zip(m.labels, m.confusion)])
    return "\n".join(out)
