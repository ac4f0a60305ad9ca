"""`retriage train` as an estimator: the one fold loop (scikit-learn's cross_validate over the blocked folds),
a train without --search that takes the shipped model's settings and says each phase on standard error, and a
train with --search whose settings a plain train then reproduces. Real labeled issues, the real CLI."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from conftest import run_cli
from retriage.classifier.dataset import Example, label_files, read_labels, snapshot_index
from retriage.classifier.embed import DIM
from retriage.classifier.features import VIEW_FIELDS, dense_features, views
from retriage.classifier.model import shipped_model_dir
from retriage.classifier.settings_search import per_fold
from retriage.classifier.train import ClassifierFit, Issues, labels_of
from retriage.taxonomy import canonical_repo, re_class_ids

HEADS = {"C": 1.0, "sparse_weight": 1.0}


def test_per_fold_measures_each_fold_with_a_fit_on_the_other_issues():
    """per_fold gives, fold by fold in order, what the measure says of a fit on every other issue: the same as
    fitting on each fold's other rows by hand."""
    rng = np.random.default_rng(0)
    classes = ["RE.1", "RE.2", "none"]
    components = ["operators", "scheduler", "other"]
    ex = [Example("o/r", i, "", f"{classes[i % 3]} word{i % 3} issue {i}", "", classes[i % 3], components[i % 3],
                  "none") for i in range(60)]
    v = [views(e.title, e.body) for e in ex]
    centres = rng.normal(size=(3, DIM))
    emb = np.array([centres[i % 3] + rng.normal(size=DIM) for i in range(60)], np.float32)
    dense = dense_features([emb] * len(VIEW_FIELDS), v)  # the view vectors, then the keyword and rule signals
    X, y = Issues.of(ex, v, dense, fold=[i // 20 for i in range(60)]), labels_of(ex)
    estimator = ClassifierFit(re_class=HEADS, component=HEADS, calibrate=False)

    def measure(fitted, X_fold, y_fold):
        got = [p.re_class for p in fitted.predict(X_fold)]
        return [len(X_fold), np.mean([g == t for g, t in zip(got, y_fold["re_class"])]),
                len(fitted.model_.tfidf.vocab_)]

    folds = X.folds()
    assert [list(b) for _, b in folds] == [list(range(k * 20, k * 20 + 20)) for k in range(3)]
    got = per_fold(estimator, measure, X, y, folds)
    by_hand = [measure(ClassifierFit(**estimator.get_params()).fit(X[a], y[a]), X[b], y[b]) for a, b in folds]
    assert got.shape == (3, 3) and np.array_equal(got, np.array(by_hand, dtype=float))
    assert got[:, 1].min() > 0.5  # the fits learned something: the measure is not of an empty model
    assert X[folds[0][1]].fold.tolist() == [0] * 20 and X[folds[0][0]].engines == [e.engine for e in ex[20:]]


def corpus_labels(folder, per_class: int = 12):
    """The shortest few labeled issues of each RE class whose text is the snapshot's (so the shipped embedding
    cache holds their vectors), as a label file."""
    snap = snapshot_index()
    records, seen = [], set()
    for path in label_files():
        for r in read_labels(path):
            key = (canonical_repo(r["repo"]), int(r["number"]))
            if key in snap and key not in seen and "text" not in r and "body" not in r:
                seen.add(key)
                records.append((len((snap[key]["title"] or "") + (snap[key]["body"] or "")), r))
    chosen = []
    for c in re_class_ids():
        mine = sorted((x for x in records if x[1]["re_class"] == c), key=lambda x: (x[0], x[1]["number"]))
        chosen += [r for _, r in mine[:2 * per_class if c == "none" else per_class]]
    folder.mkdir()
    (folder / "small.jsonl").write_text("".join(json.dumps(r) + "\n" for r in chosen))
    return folder


@pytest.fixture(scope="module")
def cached_db(tmp_path_factory):
    """A database holding the shipped embedding cache (as `retriage train` loads it)."""
    from retriage.classifier.snapshot_cache import load_into
    from retriage.db.store import connect

    path = tmp_path_factory.mktemp("train") / "cache.duckdb"
    con = connect(str(path))
    load_into(con)
    con.close()
    return path


@pytest.mark.slow
def test_train_without_search_takes_the_shipped_settings_and_says_each_phase(tmp_path, cached_db):
    """Piped, as `retriage train > log 2>&1` runs: standard error holds only the phase lines (no raw warning),
    standard output plain whole lines (every class's precision and recall, the export line on its own). Without
    --refit the one fit is its own held-out model (the refit beside it: test_classifier's end-to-end train)."""
    labels = corpus_labels(tmp_path / "labels")
    proc = run_cli("train", "--labels", str(labels), "--output", str(tmp_path / "m"), "--no-refit", db=cached_db,
                   env={"RETRIAGE_MODEL": "", "COLUMNS": "60"}, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    phases = proc.stderr.splitlines()
    print("\n" + "\n".join(phases) + "\n" + proc.stdout)
    stamps = [float(m.group(1)) for m in (re.fullmatch(r"train: .+ \[(\d+\.\d) s\]", p) for p in phases) if m]
    assert len(stamps) == len(phases) >= 6 and stamps == sorted(stamps), phases  # nothing but phase lines
    assert any(p.startswith("train: fitting the held-out model") for p in phases)
    assert any(p.startswith("train: distilling the fast head") for p in phases) and phases[-1].startswith(
        "train: done")
    assert "search" not in proc.stderr, "a train without --search never searches"
    meta, shipped = (json.loads((d / "meta.json").read_text()) for d in (tmp_path / "m", shipped_model_dir()))
    assert meta["hyperparameters"] == shipped["hyperparameters"] and meta["settings_searched"] is False
    assert (meta["threshold"], meta["fix_threshold"]) == (shipped["threshold"], shipped["fix_threshold"])
    assert "abstain_folds" not in meta and f"trained on {meta['n_train']} issues" in proc.stdout

    out = proc.stdout.splitlines()
    assert f"export RETRIAGE_MODEL={tmp_path / 'm'}" in out, out
    rows = {tuple(line.split("\t")[:2]): line.split("\t") for line in out if line.count("\t") == 5}
    dev = {t: meta["dev"][f"{t}_macro_f1"] for t in ("re_class", "component")}
    for target, f1 in dev.items():  # every class of the dev split, precision and recall whole, and the macro-F1
        assert rows[(target, "macro-F1")][3] == f"{f1:.3f}", rows
        classes = [r for k, r in rows.items() if k[0] == target and k[1] != "macro-F1"]
        assert len(classes) >= 2 and all(re.fullmatch(r"\d\.\d\d", x) for r in classes for x in r[3:]), classes

    refused = run_cli("train", "--model", str(tmp_path / "none"), "--output", str(tmp_path / "m2"), db=cached_db)
    assert refused.returncode == 1 and len(refused.stderr.splitlines()) == 1 and "does not exist" in refused.stderr
    assert not (tmp_path / "m2").exists()


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:The least populated class:UserWarning")
def test_train_with_search_chooses_settings_that_a_plain_train_reproduces(tmp_path, cached_db):
    from retriage.classifier.settings_search import ABSTAIN_THRESHOLDS, C_GRID, FIX_THRESHOLDS, NEAREST_WEIGHTS
    from retriage.classifier.train import settings_of, train
    from retriage.db.store import connect

    labels = corpus_labels(tmp_path / "labels")
    con = connect(str(cached_db))
    phases: list[str] = []
    searched = train(con, labels, tmp_path / "searched", unlabeled=[], search=True, log=phases.append)
    assert [p.split(" (")[0] for p in phases if p.startswith("search:")] == [
        "search: the RE head", "search: the component head", "search: the fix head",
        "search: the nearest labeled issues' votes", "search: the fix and abstain thresholds"]
    meta = searched.model.meta
    hp = meta["hyperparameters"]
    assert meta["settings_searched"] is True and len(meta["abstain_folds"]["precision"]) == 4
    assert hp["re_class"]["C"] in C_GRID and hp["nearest_labels"]["weight"] in NEAREST_WEIGHTS
    assert hp["known_fix"]["threshold"] in FIX_THRESHOLDS and searched.model.threshold in ABSTAIN_THRESHOLDS

    # the settings the search recorded are what a train without it uses: the same model, weight for weight
    again = train(con, labels, tmp_path / "again", unlabeled=[], settings=settings_of(tmp_path / "searched"))
    assert again.model.meta["hyperparameters"] == {k: {n: x for n, x in h.items() if n != "folds_score"}
                                                   for k, h in hp.items()}
    assert (again.model.threshold, again.model.fix_threshold) == (searched.model.threshold,
                                                                 searched.model.fix_threshold)
    for folder in ("", "held_out"):
        with np.load(tmp_path / "searched" / folder / "weights.npz") as a, \
                np.load(tmp_path / "again" / folder / "weights.npz") as b:
            assert a.files == b.files and all(np.array_equal(a[k], b[k]) for k in a.files), folder
