"""The nearest labeled issues' votes (classifier/nearest_labels.py): who votes, how votes weigh, how they are mixed
into the heads' probabilities, what a saved model keeps, and how training chooses the settings."""

from __future__ import annotations

import numpy as np
import pytest

from retriage.classifier.embed import DIM
from retriage.classifier.nearest_labels import NearestLabels, representation, views_of_dense, votes


def test_only_the_k_nearest_vote_and_closer_ones_weigh_more():
    s = np.array([[0.9, 0.8, 0.1, 0.0]])
    labels = np.array([0, 1, 2, 2])
    v = votes(s, labels, 3, k=2, temperature=0.1, balance=0.0)
    assert v[0, 2] == 0.0, "the two far issues are not among the 2 nearest"
    assert v[0, 0] > v[0, 1] > 0 and np.isclose(v.sum(), 1.0)
    assert np.isclose(v[0, 0] / v[0, 1], np.exp(0.1 / 0.1)), "weights are exp(similarity / temperature)"
    sharper = votes(s, labels, 3, k=2, temperature=0.01, balance=0.0)
    assert sharper[0, 0] > v[0, 0]


def test_balance_divides_each_vote_by_its_class_frequency():
    s = np.array([[0.5, 0.5, 0.5, 0.5]])
    labels = np.array([0, 0, 0, 1])  # three issues of class 0 (k takes them all), one of class 1
    plain = votes(s, labels, 2, k=4, temperature=1.0, balance=0.0)
    balanced = votes(s, labels, 2, k=4, temperature=1.0, balance=1.0)
    assert np.allclose(plain[0], [0.75, 0.25]) and np.allclose(balanced[0], [0.5, 0.5])
    # k larger than the labeled set: every issue votes
    assert np.allclose(votes(s, labels, 2, k=50, temperature=1.0, balance=0.0), plain)


def _unit_rows(rng, n):
    x = rng.normal(size=(n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_representation_is_the_normalised_sum_of_the_unit_views():
    rng = np.random.default_rng(0)
    views = [_unit_rows(rng, 3) * 5, _unit_rows(rng, 3), _unit_rows(rng, 3) * 0.2]
    r = representation(views)
    expect = sum(x / np.linalg.norm(x, axis=1, keepdims=True) for x in views)
    assert np.allclose(r, expect / np.linalg.norm(expect, axis=1, keepdims=True), atol=1e-6)
    dense = np.hstack(views + [np.ones((3, 7), np.float32)])  # the signals after the embeddings are not views
    assert all(np.array_equal(a, b) for a, b in zip(views_of_dense(dense), views))


def test_mix_moves_the_answer_towards_the_neighbours_by_the_weight_and_round_trips():
    rng = np.random.default_rng(1)
    labeled = [_unit_rows(rng, 6) for _ in range(3)]
    n = NearestLabels.fit(labeled, ["RE.1"] * 3 + ["none"] * 3, ["operators"] * 6, ["RE.1", "none"],
                       ["operators", "other"], {"k": 1, "temperature": 0.1, "balance": 0.5, "weight": 0.4})
    query = [x[:1] for x in labeled]  # the first labeled issue itself: its nearest is itself, an RE.1
    p_re, p_comp = np.array([[0.1, 0.9]]), np.array([[0.2, 0.8]])
    m_re, m_comp = n.mix(p_re, p_comp, query)
    assert np.allclose(m_re, [[0.6 * 0.1 + 0.4, 0.6 * 0.9]], atol=1e-3)
    assert np.allclose(m_comp, [[0.6 * 0.2 + 0.4, 0.6 * 0.8]], atol=1e-3)
    off = NearestLabels(**{**n.__dict__, "weight": 0.0})
    assert off.mix(p_re, p_comp, query)[0] is p_re

    back = NearestLabels.from_arrays(n.to_arrays(), n.settings, 2, 2)
    assert back.settings == n.settings and np.array_equal(back.vectors, n.vectors)
    assert np.allclose(back.mix(p_re, p_comp, query)[0], m_re)
    with pytest.raises(ValueError, match="outside"):
        NearestLabels.from_arrays(n.to_arrays(), n.settings, 1, 2)  # a label index past the RE head's classes
    bad = dict(n.to_arrays(), nearest_re=n.re_labels[:2])
    with pytest.raises(ValueError, match="shapes"):
        NearestLabels.from_arrays(bad, n.settings, 2, 2)


def test_the_shipped_model_mixes_its_neighbours_only_where_it_has_embeddings(shipped_model_and_sample):
    model, v, emb = shipped_model_and_sample
    assert model.nearest_labels is not None and model.nearest_labels.weight > 0
    assert len(model.nearest_labels.vectors) == model.meta["n_train"]
    lr, lc = model.lexical_logits(v)
    er, ec = model.embedding_logits(emb)
    heads_only = model.probabilities(lr + er, lc + ec)
    mixed = model.probabilities(lr + er, lc + ec, emb)
    v_re, _ = model.nearest_labels.votes(emb)
    w = model.nearest_labels.weight
    assert np.allclose(mixed[0], (1 - w) * heads_only[0] + w * v_re, atol=1e-6)
    got = [p.re_probs for p in model.predict(v, emb)]
    assert all(abs(g[c] - mixed[0][i, j]) < 1e-3 for i, g in enumerate(got)
               for j, c in enumerate(model.re_head.classes_))


@pytest.fixture(scope="module")
def shipped_model_and_sample():
    from retriage.classifier.dataset import load_gold
    from retriage.classifier.evaluation import cached_embedder
    from retriage.classifier.features import dense_features, views
    from retriage.classifier.model import IssueClassifier

    items = [e for e in load_gold() if e.source == "real"][:12]
    v = [views(e.title, e.body) for e in items]
    return IssueClassifier.load(), v, cached_embedder(None)(v)


def test_training_chooses_settings_on_the_folds_and_may_choose_none():
    """Where the labels follow the embeddings' neighbourhoods and the heads are too weak to (strongly
    regularised), the search over the folds gives the votes a weight; the heads alone (weight 0) are one choice."""
    from retriage.classifier.dataset import Example
    from retriage.classifier.features import dense_features, views
    from retriage.classifier.settings_search import NEAREST_WEIGHTS, _search_nearest_labels

    rng = np.random.default_rng(2)
    centres = _unit_rows(rng, 8)
    classes = ["RE.1", "RE.2", "none", "none", "RE.3", "none", "RE.4", "none"]  # clusters, not half-spaces
    comps = ["operators", "scheduler", "other", "frontend", "engine_setup", "other", "model_loader", "other"]
    rows, labels, components = [], [], []
    for i in range(240):
        c = i % 8
        rows.append(centres[c] + 0.05 * rng.normal(size=DIM))
        labels.append(classes[c])
        components.append(comps[c])
    emb = np.array(rows, np.float32)
    ex = [Example("o/r", i, "", f"issue {i}", "", labels[i], components[i], "none") for i in range(240)]
    v = [views(e.title, e.body) for e in ex]
    dense = dense_features([emb, emb, emb], v)  # the views' vectors, then the keyword and rule signals
    folds = [([i for i in range(240) if i // 8 % 4 != f], [i for i in range(240) if i // 8 % 4 == f]) for f in range(4)]
    weak = {"re_class": {"C": 1e-4, "sparse_weight": 1.0}, "component": {"C": 1e-4, "sparse_weight": 1.0}}
    chosen = _search_nearest_labels(ex, v, dense, folds, weak)
    assert chosen["weight"] in NEAREST_WEIGHTS and chosen["weight"] > 0, chosen
    assert chosen["folds_score"] > 0.9, chosen  # the votes alone recover the clusters


def test_extended_neighbours_vote_at_once_and_nearest_says_how_far():
    rng = np.random.default_rng(3)
    labeled = [_unit_rows(rng, 4) for _ in range(3)]
    n = NearestLabels.fit(labeled, ["none"] * 4, ["other"] * 4, ["RE.2", "none"], ["operators", "other"],
                          {"k": 3, "temperature": 0.05, "balance": 0.0, "weight": 0.4})
    query = [_unit_rows(rng, 1) for _ in range(3)]
    assert n.votes(query)[0][0, 0] == 0.0 and n.nearest(query)[0] < 0.5, "nothing near, nothing votes RE.2"
    more = n.extended(representation(query), np.array([0]), np.array([0]))
    assert len(more.vectors) == 5 and len(n.vectors) == 4, "a new object; the model's own neighbours unchanged"
    assert more.votes(query)[0][0, 0] > 0.99 and np.isclose(more.nearest(query)[0], 1.0, atol=1e-3)
    assert n.extended(np.zeros((0, DIM)), np.zeros(0), np.zeros(0)) is n
