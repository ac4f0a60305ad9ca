"""`retriage eval` remembers what it computed (classifier/result_cache.py) and scores in numpy: the remembered
answers come back only for the same inputs, and the numpy figures are scikit-learn's. What it scores is the one
decision (classifier/decision.py), the answer `predict` writes."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from retriage.classifier import metrics, result_cache
from retriage.classifier.dataset import load_gold
from retriage.classifier.splits import Split

LABELS = ["RE.1", "RE.2", "RE.3", "RE.4", "none"]


def test_score_is_scikit_learns():
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, precision_recall_fscore_support

    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(1, 40)
        classes = rng.sample(LABELS, rng.randint(1, 5))
        y = [rng.choice(classes) for _ in range(n)]
        p = [rng.choice(LABELS) for _ in range(n)]
        s = metrics.score(y, p, LABELS)
        present = [c for c in LABELS if c in set(y) | set(p)]
        pr, rc, f1, support = precision_recall_fscore_support(y, p, labels=present, zero_division=0)
        assert s.labels == present
        assert s.macro_f1 == round(float(f1_score(y, p, labels=present, average="macro", zero_division=0)), 4)
        assert s.accuracy == round(float(accuracy_score(y, p)), 4)
        assert s.confusion == confusion_matrix(y, p, labels=present).tolist()
        for i, c in enumerate(present):
            assert s.per_class[c] == {"precision": round(float(pr[i]), 3), "recall": round(float(rc[i]), 3),
                                      "f1": round(float(f1[i]), 3), "support": int(support[i])}


def _bootstrap_one_round_at_a_time(y, p, labels, rounds=1000, seed=0):
    index = {c: i for i, c in enumerate(labels)}
    k = len(labels)
    t, q = np.array([index[v] for v in y]), np.array([index[v] for v in p])
    rng = np.random.default_rng(seed)
    stats = []
    for _ in range(rounds):
        i = rng.integers(0, len(t), len(t))
        cm = np.bincount(t[i] * k + q[i], minlength=k * k).reshape(k, k)
        tp, sup, pred = np.diag(cm), cm.sum(1), cm.sum(0)
        present = (sup + pred) > 0
        stats.append(np.divide(2 * tp, sup + pred, out=np.zeros(k), where=present)[present].mean())
    lo, hi = np.quantile(stats, [0.025, 0.975])
    return round(float(lo), 4), round(float(hi), 4)


def test_counted_detection_sets_the_unsure_aside_but_keeps_their_resource_bugs_in_recall():
    y = ["RE.1", "RE.2", "none", "none", "RE.3", "none"]
    pred = ["RE.1", "RE.2", "RE.4", "none", "none", "RE.1"]
    unsure = [False, True, False, False, False, True]
    every = metrics.detection(y, pred)
    counted = metrics.counted_detection(y, pred, unsure)
    assert (every["precision"], every["recall"], every["flagged"]) == (0.5, round(2 / 3, 4), 4)
    # flagged and sure: issues 0 (a resource bug) and 2 (not one); the unsure RE.2 is a miss
    assert counted == {"precision": 0.5, "recall": round(1 / 3, 4), "flagged": 2, "positives": 3, "unsure": 2}
    assert metrics.counted_detection(y, pred, [False] * 6) == dict(every, unsure=0)


def test_remembered_confidences_must_be_finite_numbers():
    keys = ("re_class", "re_confidence")
    assert result_cache.is_answers({"re_class": ["RE.1"], "re_confidence": [0.61]}, 1, keys)
    for bad in (float("nan"), float("inf"), None, [0.61]):
        assert not result_cache.is_answers({"re_class": ["RE.1"], "re_confidence": [bad]}, 1, keys), bad


@pytest.mark.parametrize("n", [3, 40, 400])
def test_bootstrap_interval_draws_as_one_round_at_a_time(n):
    rng = random.Random(n)
    y = [rng.choice(LABELS) for _ in range(n)]
    p = [v if rng.random() < 0.6 else rng.choice(LABELS) for v in y]
    assert metrics.bootstrap_interval(y, p, LABELS) == _bootstrap_one_round_at_a_time(y, p, LABELS)


def test_remember_computes_once_per_material_and_replaces_bad_entries(tmp_path, monkeypatch):
    monkeypatch.setenv("RETRIAGE_CACHE_DIR", str(tmp_path))
    calls = []

    def compute(value):
        def run():
            calls.append(value)
            return [value]
        return run

    valid = lambda x: result_cache.is_str_list(x, 1)  # noqa: E731
    assert result_cache.remember("t", {"a": 1}, compute("x"), valid) == ["x"]
    assert result_cache.remember("t", {"a": 1}, compute("y"), valid) == ["x"]  # read back, not computed
    assert result_cache.remember("t", {"a": 2}, compute("z"), valid) == ["z"]  # other material, other entry
    assert calls == ["x", "z"]
    entries = sorted((tmp_path / "results").glob("t-*.json"))
    assert len(entries) == 2
    for e in entries:  # a damaged entry, and one of the wrong shape, are computed again
        e.write_text("{not json" if "x" in e.read_text() else json.dumps([1, 2]))
    assert result_cache.remember("t", {"a": 1}, compute("x2"), valid) == ["x2"]
    assert result_cache.remember("t", {"a": 2}, compute("z2"), valid) == ["z2"]
    assert calls == ["x", "z", "x2", "z2"]


def test_examples_material_follows_text_and_labels():
    a, b = load_gold()[:2]
    base = result_cache.examples_material([a, b])
    assert base == result_cache.examples_material([a, b]) and base[0] != base[1]
    changed = type(a)(**{**a.__dict__, "re_class": "RE.4" if a.re_class != "RE.4" else "none"})
    assert result_cache.examples_material([changed, b])[0] != base[0]
    retitled = type(a)(**{**a.__dict__, "title": a.title + "!"})
    assert result_cache.examples_material([retitled])[0] != base[0]


@pytest.mark.slow
def test_a_refit_is_remembered_for_the_same_split_only(tmp_path, monkeypatch):
    from retriage.classifier.generalisation import evaluate_split
    from retriage.classifier.model import IssueClassifier
    from retriage.classifier.snapshot_cache import shipped_embedder

    monkeypatch.setenv("RETRIAGE_CACHE_DIR", str(tmp_path))
    team = [e for e in load_gold() if e.source == "corpus"]
    rng = random.Random(3)
    rng.shuffle(team)
    sp = Split("future", "a small split", team[:160], team[160:220])
    hyper = IssueClassifier.load().meta["hyperparameters"]
    embed = shipped_embedder()
    first = evaluate_split(sp, embed, hyper).to_dict()
    refits = list((tmp_path / "results").glob("refit-future-*.json"))
    assert len(refits) == 1

    def no_embedding(_views):
        raise AssertionError("a remembered split embedded again")

    assert evaluate_split(sp, no_embedding, hyper).to_dict() == first
    moved = Split("future", "a small split", team[:159], team[160:220])  # one training issue fewer
    evaluate_split(moved, embed, hyper)
    assert len(list((tmp_path / "results").glob("refit-future-*.json"))) == 2


@pytest.mark.slow
def test_eval_scores_the_decision_predict_writes():
    """On dev issues where the decision is not the model's alone (vllm#19741: a rule's class for its mixed GPUs;
    a resource fix of the fix head beside `none`, left out), eval's answers are what `predict` writes for the same
    issues with the same model (the held-out fit that scores the dev split): class, abstention and fixes."""
    from retriage.classifier.embedding_cache import embed_views
    from retriage.classifier.features import views
    from retriage.classifier.generalisation import decided_answers
    from retriage.classifier.model import IssueClassifier
    from retriage.classifier.predict import fixes_for, predict_records

    keys = {("vllm-project/vllm", 19741), ("NVIDIA/TensorRT-LLM", 8283), ("sgl-project/sglang", 7592)}
    chosen = [e for e in load_gold() if e.key in keys] + load_gold()[:5]
    model = IssueClassifier.load().held_out()
    v = [views(e.title, e.body) for e in chosen]
    emb = embed_views(None, v)
    got = decided_answers(model, chosen, v, emb)
    want = predict_records([{"repo": e.repo, "number": e.number, "title": e.title, "body": e.body} for e in chosen],
                           model)
    assert (got["re_class"], got["abstained"], got["fixes"]) == (
        [w["re_class"] for w in want], [w["abstained"] for w in want], [w["known_fixes"] for w in want])
    raw = [(p.re_class, fixes_for(x, e.engine, p)) for e, x, p in zip(chosen, v, model.predict(v, emb))]
    changed = [e.key for e, r, c, f in zip(chosen, raw, got["re_class"], got["fixes"]) if r != (c, f)]
    assert len(changed) >= 2, "the decision changes some of these issues' answers, or they test nothing"
