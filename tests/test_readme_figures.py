"""The README's evaluation figures are what `retriage eval` computes from the shipped model and the package's
embedding cache (no database, nothing embedded): every row of its generalisation table is regenerated here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from retriage.classifier.evaluation import run_eval

pytestmark = pytest.mark.slow  # refits the model on each split's training side (about a minute)

README = Path(__file__).resolve().parents[1] / "README.md"
ROW = re.compile(r"^\| (dev|future|new engine) \| (model|TF-IDF \+ LR|keyword rules|majority) \| \*{0,2}([\d.]+)\*{0,2} "
                 r"\(([\d.]+)–([\d.]+)\) \|[^|]*\| ([\d.]+)/([\d.]+) \| ([\d.]+) \|", re.M)
SYSTEMS = {"model": "model", "TF-IDF + LR": "tfidf_logreg", "keyword rules": "keyword_rules", "majority": "majority"}


@pytest.fixture(scope="module")
def report():
    return run_eval(None, None)


def test_every_readme_row_is_regenerated(report):
    rows = ROW.findall(README.read_text())
    assert len(rows) == 12, rows  # three splits x four systems
    splits = {"dev": report.summary, "future": report.generalisation[0], "new engine": report.generalisation[1]}
    for split, system, f1, lo, hi, p, r, comp in rows:
        s = splits[split].systems[SYSTEMS[system]]
        got = (s.re_macro_f1, *s.re_interval, s.detection["precision"], s.detection["recall"], s.component_macro_f1)
        want = tuple(float(x) for x in (f1, lo, hi, p, r, comp))
        # a refit is exact on one machine but not across CPUs (lbfgs on the machine's BLAS kernels): the same
        # commit read future RE macro-F1 0.7147 here and 0.7202 on a CI machine (one issue's class among the
        # small RE classes), and a refit's detection figures have moved by up to 0.008 (3 of 463 resource bugs);
        # the README rounds to two places. Two issues' worth of F1, so a stale row (a refit, a new label) fails.
        tolerance = (0.011, 0.011, 0.011, 0.01, 0.01, 0.008)
        assert all(abs(g - w) < t for g, w, t in zip(got, want, tolerance)), (split, system, got, want)


COUNTED = re.compile(r"^\| (dev|future|new engine) \| ([\d.]+)/([\d.]+) \| ([\d.]+)/([\d.]+) \| ([\d,]+) of ([\d,]+) \|$",
                     re.M)


def test_the_counted_detection_rows_are_regenerated(report):
    """Resource-bug detection as the report and the bot count it (unsure set aside), beside every answer's."""
    rows = COUNTED.findall(README.read_text())
    assert [r[0] for r in rows] == ["dev", "future", "new engine"], rows
    splits = {"dev": report.summary, "future": report.generalisation[0], "new engine": report.generalisation[1]}
    for split, p, r, cp, cr, unsure, n in rows:
        s, n_test = splits[split].systems["model"], splits[split].n_test
        assert n_test == int(n.replace(",", "")), split
        counted = s.counted
        assert counted["flagged"] <= s.detection["flagged"] and counted["positives"] == s.detection["positives"]
        got = (s.detection["precision"], s.detection["recall"], counted["precision"], counted["recall"])
        want = tuple(float(x) for x in (p, r, cp, cr))
        assert all(abs(g - w) < 0.01 for g, w in zip(got, want)), (split, got, want)
        assert abs(counted["unsure"] - int(unsure.replace(",", ""))) <= 3, (split, counted["unsure"], unsure)


def test_dev_rows_are_the_shipped_models_fit_without_the_dev_split(report):
    from retriage.classifier.model import IssueClassifier

    shipped = IssueClassifier.load()
    assert report.model_version == shipped.version
    assert report.scored_by == shipped.held_out().version != shipped.version, "dev is scored by the held-out fit"
    model = next(r for r in ROW.findall(README.read_text()) if r[:2] == ("dev", "model"))
    assert abs(report.scores["re_class"]["model"].macro_f1 - float(model[2])) < 0.0006
    assert abs(report.scores["component"]["model"].macro_f1 - float(model[7])) < 0.0006
    assert f"`{report.model_version}`" in README.read_text() and f"`{report.scored_by}`" in README.read_text()


HOLDOUT_ROW = re.compile(r"^\| fresh_6 · (model|TF-IDF \+ LR) \| ([\d.]+) \(([\d.]+)–([\d.]+)\) \| ([\d.]+)/([\d.]+) \| ([\d.]+) \|",
                         re.M)


def test_the_holdout_rows_are_regenerated(report):
    """The README's figures on taxonomy/holdout/fresh_6.jsonl (issues kept out of every fit) are what `retriage
    eval` prints as its holdout set, and what `retriage eval --gold` computes on the file with the shipped model."""
    from retriage.taxonomy import HOLDOUT_DIR

    rows = HOLDOUT_ROW.findall(README.read_text())
    assert [r[0] for r in rows] == ["model", "TF-IDF + LR"], rows
    held = report.generalisation[-1]
    assert (held.name, held.n_test, held.n_train) == ("holdout", 133, report.n_train + report.n), held.to_dict()
    alone = run_eval(HOLDOUT_DIR / "fresh_6.jsonl", None, generalisation=False).summary
    for system, f1, lo, hi, p, r, comp in rows:
        s = held.systems[SYSTEMS[system]]
        got = (s.re_macro_f1, *s.re_interval, s.detection["precision"], s.detection["recall"], s.component_macro_f1)
        want = tuple(float(x) for x in (f1, lo, hi, p, r, comp))
        assert all(abs(g - w) < 0.011 for g, w in zip(got, want)), (system, got, want)
        assert s.to_dict() == alone.systems[SYSTEMS[system]].to_dict(), system
