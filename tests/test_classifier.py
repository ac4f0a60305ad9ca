"""The classifier: heads, the saved model and its version, the shipped model, the labeled set and its split, and a
small end-to-end training run on real labeled issues (embedded with the numpy MiniLM port through a DuckDB cache)."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from retriage.classifier import current_model_version, metrics
from retriage.classifier.dataset import label_files, load_gold, read_labels, snapshot_index, split
from retriage.classifier.embed import NumpyMiniLM
from retriage.classifier.features import VIEW_FIELDS, Tfidf, dense_features, keyword_vector, rule_vector, views
from retriage.classifier.head import SOLVER, LinearHead
from retriage.classifier.model import IssueClassifier, shipped_model_dir
from retriage.taxonomy import canonical_repo, component_ids, fix_tag_ids, re_class_ids, resource_class_ids

pytestmark = pytest.mark.slow  # fresh interpreters, the real model or a training run: the full tier only


@pytest.fixture(scope="module")
def gold():
    return load_gold()


@pytest.fixture(scope="module")
def minilm():
    return NumpyMiniLM()


@pytest.fixture(scope="module")
def shipped():
    return IssueClassifier.load()


def shortest(examples, n: int) -> list:
    return sorted(examples, key=lambda e: (len(e.title) + len(e.body), e.repo, e.number))[:n]


def embed(minilm, v) -> list[np.ndarray]:
    return [minilm.encode([getattr(x, f) for x in v]) for f in VIEW_FIELDS]


# ---- the labeled set and its split ----------------------------------------------------------------------------------
def test_labeled_set_size_classes_and_urls(gold):
    counts = Counter(e.re_class for e in gold)
    print(f"\n{len(gold)} labeled issues: {dict(sorted(counts.items()))}")
    assert len(gold) >= 900
    assert all(counts[c] >= 60 for c in resource_class_ids()), counts
    for e in gold:
        assert e.re_class in re_class_ids() and e.component in component_ids() and e.known_fix in fix_tag_ids()
    for path in label_files():
        for r in read_labels(path):
            m = re.fullmatch(r"https://github\.com/([\w.-]+/[\w.-]+)/issues/(\d+)", r.get("html_url") or "")
            assert m, f"{path.name}: {r.get('repo')}#{r.get('number')} has no issue html_url"
            assert (canonical_repo(m.group(1)), int(m.group(2))) == (canonical_repo(r["repo"]), r["number"])


def test_split_is_deterministic_disjoint_and_newest_per_repo_in_dev(gold):
    train, dev = split(gold)
    assert (train, dev) == split(list(gold))
    assert (train, dev) == split(list(reversed(gold)))
    keys_tr, keys_dv = {e.key for e in train}, {e.key for e in dev}
    assert not keys_tr & keys_dv and keys_tr | keys_dv == {e.key for e in gold}
    assert len(train) + len(dev) == len(gold)
    groups = {(e.repo, e.source) for e in gold}
    for repo, source in groups:
        tr = [e.number for e in train if (e.repo, e.source) == (repo, source)]
        dv = [e.number for e in dev if (e.repo, e.source) == (repo, source)]
        n = len(tr) + len(dv)
        assert len(dv) == round(n * 0.25), (repo, source)
        if tr and dv:
            assert max(tr) < min(dv), f"{repo} ({source}): a dev issue is older than a training issue"
    assert 0.2 < len(dev) / len(gold) < 0.3


def test_fold_numbers_are_the_dev_split_then_stretches_of_the_training_side(gold):
    from sklearn.model_selection import PredefinedSplit

    from retriage.classifier.dataset import fold_numbers

    train, dev = split(gold)
    numbers = fold_numbers(gold)
    assert sorted(set(numbers)) == [0, 1, 2, 3]
    assert {e.key for e, f in zip(gold, numbers) if f == 0} == {e.key for e in dev}
    blocks = [[e for e, f in zip(gold, numbers) if f == k] for k in (1, 2, 3)]
    assert sum(len(b) for b in blocks) == len(train)
    for (fit_on, scored), k in zip(PredefinedSplit(numbers).split(), range(4)):
        assert [numbers[i] for i in scored] == [k] * len(scored) and k not in {numbers[i] for i in fit_on}
        assert len(fit_on) + len(scored) == len(gold)  # the rest of the labeled set, dev split included
    for (repo, source) in {(e.repo, e.source) for e in train}:
        numbers_ = [[e.number for e in b if (e.repo, e.source) == (repo, source)] for b in blocks]
        ranges = [(min(n), max(n)) for n in numbers_ if n]
        assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:])), f"{repo}: blocks are not consecutive"
        assert max(len(n) for n in numbers_) - min(len(n) for n in numbers_) <= 1, repo


# ---- LinearHead ---------------------------------------------------------------------------------------------------
def test_linear_head_fit_save_load_gives_identical_probabilities(gold, tmp_path):
    train, dev = split(gold)
    train = shortest([e for e in train if e.source == "corpus"], 300)
    dev = shortest(dev, 40)
    vt, vd = [views(e.title, e.body) for e in train], [views(e.title, e.body) for e in dev]
    tfidf = Tfidf().fit([x.lexical for x in vt])

    def dense(v):
        return np.array([np.concatenate([keyword_vector(x.lexical), rule_vector(x)]) for x in v],
                        dtype=np.float32)

    head = LinearHead(C=4.0).fit(dense(vt), tfidf.transform([x.lexical for x in vt]),
                                 [e.component for e in train], component_ids())
    rows = [tfidf.transform_one(x.lexical) for x in vd]
    before = head.predict_proba(dense(vd), rows)
    np.savez(tmp_path / "head.npz", **head.to_arrays("component"))
    with np.load(tmp_path / "head.npz", allow_pickle=False) as a:
        loaded = LinearHead.from_arrays({k: a[k] for k in a.files}, "component", head.classes_)
    after = loaded.predict_proba(dense(vd), rows)
    assert np.array_equal(before, after)
    assert np.allclose(before.sum(axis=1), 1.0, atol=1e-5) and (before >= 0).all()
    assert head.temperature_ > 0 and set(head.classes_) <= set(component_ids())


def test_keyword_signals_are_remembered_only_while_the_document_lives():
    import gc

    from retriage.classifier import features

    doc = views("CUDA out of memory", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    first = features.keyword_signals(doc)
    assert np.array_equal(first, keyword_vector(doc.lexical)) and first.any()
    assert features.keyword_signals(doc) is first and not first.flags.writeable  # remembered, read-only
    n = len(features._SIGNALS)
    del doc
    gc.collect()
    assert len(features._SIGNALS) == n - 1  # gone with its document: a long run holds nothing extra


def test_the_solvers_reach_the_same_head(gold):
    """Newton-CG (the default) and lbfgs minimise the same strictly convex loss, with the calibration folds warm
    started from the full fit: the two heads' weights, temperatures and answers agree (a solver or a warm start that
    fitted something else, e.g. folds starting from another class order, would not)."""
    train, dev = split(gold)
    train = shortest([e for e in train if e.source == "corpus"], 300)  # a class with one issue: a fold without it
    dev = shortest(dev, 60)
    vt, vd = [views(e.title, e.body) for e in train], [views(e.title, e.body) for e in dev]
    tfidf = Tfidf().fit([x.lexical for x in vt])
    dense_t = np.array([keyword_vector(x.lexical) for x in vt], dtype=np.float32)
    dense_d = np.array([keyword_vector(x.lexical) for x in vd], dtype=np.float32)
    rows = [tfidf.transform_one(x.lexical) for x in vd]
    y = [e.re_class for e in train]
    heads = {solver: LinearHead(C=2.0, sparse_weight=2.0, lexical_blend=0.3, solver=solver).fit(
        dense_t, tfidf.transform([x.lexical for x in vt]), y, re_class_ids()) for solver in ("newton-cg", "lbfgs")}
    a, b = heads["newton-cg"], heads["lbfgs"]
    assert a.classes_ == b.classes_ and len(a.classes_) >= 3
    assert abs(a.temperature_ - b.temperature_) / b.temperature_ < 0.1
    pa, pb = a.predict_proba(dense_d, rows), b.predict_proba(dense_d, rows)
    assert np.abs(pa - pb).max() < 0.05
    assert (pa.argmax(axis=1) == pb.argmax(axis=1)).mean() >= 0.95


def test_the_tfidf_baseline_gives_the_same_answers_with_its_matrices_shared(gold):
    train, dev = split(gold)
    train, dev = train[::6], dev[::10]  # every class of both targets, a few seconds
    tr, te = [views(e.title, e.body).lexical for e in train], [views(e.title, e.body).lexical for e in dev]
    matrices = metrics.tfidf_matrices(tr, te)
    for target in ("re_class", "component"):
        y = [getattr(e, target) for e in train]
        alone = metrics.tfidf_logreg(tr, y, te)
        assert metrics.tfidf_logreg(tr, y, te, matrices) == alone
        assert len(alone) == len(te) and len(set(alone)) >= 2


def test_scale_prior_multiplies_the_odds_of_one_class_only(gold):
    train = shortest([e for e in split(gold)[0] if e.source == "corpus"], 200)
    vt = [views(e.title, e.body) for e in train]
    tfidf = Tfidf().fit([x.lexical for x in vt])
    sparse = tfidf.transform([x.lexical for x in vt])
    dense = np.zeros((len(vt), 1), np.float32)
    head = LinearHead(C=2.0, calibrate=False).fit(dense, sparse, [e.re_class for e in train], re_class_ids())
    rows = [tfidf.transform_one(x.lexical) for x in vt[:30]]
    before = head.predict_proba(dense[:30], rows)
    bias = head.bias_.copy()
    after = head.scale_prior("none", 0.5).predict_proba(dense[:30], rows)
    n = head.classes_.index("none")
    a, b = [i for i, c in enumerate(head.classes_) if c != "none"][:2]
    assert np.allclose((after[:, n] / after[:, a]) / (before[:, n] / before[:, a]), 0.5, rtol=1e-4)
    assert np.allclose(after[:, a] / after[:, b], before[:, a] / before[:, b], rtol=1e-4)  # the others keep theirs
    assert not np.array_equal(bias, head.bias_)
    assert np.array_equal(head.scale_prior("RE.9", 0.5).bias_, head.bias_)  # an unknown label: unchanged


def test_blended_head_is_the_sum_of_its_two_models(gold):
    """The TF-IDF-only model folded into the head gives exactly the logits of the two models fitted apart
    (the first on [dense | weighted TF-IDF], the second on TF-IDF alone), the second scaled by the blend."""
    from scipy.sparse import csr_matrix, hstack
    from sklearn.linear_model import LogisticRegression

    train, dev = split(gold)
    train, dev = shortest([e for e in train if e.source == "corpus"], 300), shortest(dev, 40)
    vt, vd = [views(e.title, e.body) for e in train], [views(e.title, e.body) for e in dev]
    tfidf = Tfidf().fit([x.lexical for x in vt])
    dense_t, dense_d = (np.array([keyword_vector(x.lexical) for x in v], dtype=np.float32) for v in (vt, vd))
    sparse_t, sparse_d = tfidf.transform([x.lexical for x in vt]), tfidf.transform([x.lexical for x in vd])
    y = [e.component for e in train]
    head = LinearHead(C=2.0, sparse_weight=2.0, calibrate=False, lexical_C=3.0, lexical_blend=0.6).fit(
        dense_t, sparse_t, y, component_ids())
    plain = LinearHead(C=2.0, sparse_weight=2.0, calibrate=False).fit(dense_t, sparse_t, y, component_ids())
    yi = [head.classes_.index(v) for v in y]
    first = LogisticRegression(C=2.0, class_weight="balanced", max_iter=2000, random_state=0, solver=SOLVER).fit(
        hstack([csr_matrix(dense_t), sparse_t * 2.0]).tocsr(), yi)
    second = LogisticRegression(C=3.0, class_weight="balanced", max_iter=2000, random_state=0, solver=SOLVER).fit(
        sparse_t, yi)
    want = first.decision_function(hstack([csr_matrix(dense_d), sparse_d * 2.0]).tocsr()) \
        + 0.6 * second.decision_function(sparse_d)
    rows = [tfidf.transform_one(x.lexical) for x in vd]
    got = head.logits(dense_d, rows)
    assert np.allclose(got, want, atol=1e-3)
    assert np.allclose(plain.logits(dense_d, rows), first.decision_function(
        hstack([csr_matrix(dense_d), sparse_d * 2.0]).tocsr()), atol=1e-3)
    assert not np.allclose(got, plain.logits(dense_d, rows), atol=1e-2)  # the blend changes the answer


# ---- IssueClassifier: persistence and version ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def sample(gold, minilm):
    """Six short real labeled issues, their views and numpy-MiniLM embeddings."""

    items = shortest([e for e in gold if e.source == "corpus"], 3) + shortest([e for e in gold if e.re_class != "none"], 3)
    v = [views(e.title, e.body) for e in items]
    return items, v, embed(minilm, v)


def test_save_load_round_trip_and_content_hash(shipped, sample, tmp_path):
    _, v, emb = sample
    version = shipped.save(tmp_path / "a")
    assert version == shipped.version == current_model_version(), "same content, same version"
    time.sleep(1.1)
    again = IssueClassifier.load(tmp_path / "a")
    assert again.save(tmp_path / "b") == version
    for name in ("weights.npz", "vocab.txt", "meta.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert [p.to_dict() for p in again.predict(v, emb)] == [p.to_dict() for p in shipped.predict(v, emb)]
    # a model refitted on the dev split takes its held-out fit along
    for copy in ("a", "b"):
        held_out = IssueClassifier.load(tmp_path / copy).held_out()
        assert held_out.folder == tmp_path / copy / "held_out" and held_out.version == shipped.meta["held_out_version"]

    changed = IssueClassifier.load(tmp_path / "a")
    changed.re_head.bias_ = changed.re_head.bias_.copy()
    changed.re_head.bias_[0] += np.float32(0.01)
    other = changed.save(tmp_path / "c")
    assert other != version and IssueClassifier.load(tmp_path / "c").version == other

    tuned = IssueClassifier.load(tmp_path / "a")
    tuned.threshold = round(tuned.threshold + 0.01, 4)
    assert tuned.save(tmp_path / "d") not in (version, other)
    assert re.fullmatch(r"m-[0-9a-f]{12}", version)


def test_weights_are_plain_arrays():
    with np.load(shipped_model_dir() / "weights.npz", allow_pickle=False) as a:
        assert a.files and all(a[k].dtype.kind in "fiu" for k in a.files)
    meta = json.loads((shipped_model_dir() / "meta.json").read_text())
    assert meta["model_version"] == current_model_version()


# ---- the shipped model ----------------------------------------------------------------------------------------------
def test_shipped_model_loads_and_predicts(shipped, sample):
    _, v, emb = sample
    assert shipped.re_head.classes_ == re_class_ids() and shipped.component_head.classes_ == component_ids()
    assert 0 < shipped.threshold < 1
    for p in shipped.predict(v, emb):
        assert p.re_class in re_class_ids() and p.component in component_ids()
        assert 0 <= p.re_confidence <= 1 and 0 <= p.component_confidence <= 1
        assert p.abstained == (p.re_confidence < shipped.threshold)
        assert abs(sum(p.re_probs.values()) - 1) < 1e-3 and abs(sum(p.component_probs.values()) - 1) < 1e-3
        assert p.re_confidence == max(p.re_probs.values()) and p.re_probs[p.re_class] == p.re_confidence


def test_abstention_follows_the_threshold(sample):
    _, v, emb = sample
    model = IssueClassifier.load()
    best = model.predict(v, emb)
    model.threshold = 1.01
    unsure = model.predict(v, emb)
    assert all(p.abstained for p in unsure)
    assert [p.re_class for p in unsure] == [p.re_class for p in best], "the best guess stays when abstaining"
    model.threshold = 0.0
    assert not any(p.abstained for p in model.predict(v, emb))


def test_shipped_meta_has_dev_figures(shipped):
    meta = shipped.meta
    dev = meta["dev"]
    for key in ("re_class_macro_f1", "component_macro_f1", "coverage"):
        assert 0.0 < dev[key] <= 1.0, key
    assert meta["n_train"] > 0 and meta["n_dev"] > 0
    assert meta["refit_on_dev"], "the shipped model is fitted on every labeled issue, the dev split included"
    assert 0.2 < meta["n_dev"] / meta["n_train"] < 0.3
    held_out = shipped.held_out()
    assert held_out.version == meta["held_out_version"] != shipped.version
    assert held_out.meta["n_train"] == meta["n_train"] - meta["n_dev"] and held_out.meta["dev"] == dev
    assert (held_out.threshold, held_out.fix_threshold) == (shipped.threshold, shipped.fix_threshold)
    assert held_out.meta["hyperparameters"] == meta["hyperparameters"]
    assert meta["embedding_model"] == "all-MiniLM-L6-v2"
    print(f"\nshipped model {shipped.version}: dev {dev} on {meta['n_dev']} issues ({meta['n_train']} trained)")


# ---- training end to end --------------------------------------------------------------------------------------------
class CountingEmbedder:
    """The real numpy MiniLM behind the Embedder interface, counting the texts it embeds."""

    texts = 0
    shared = None
    name, dimension = NumpyMiniLM.name, NumpyMiniLM.dimension

    def encode(self, texts):
        CountingEmbedder.shared = CountingEmbedder.shared or NumpyMiniLM()
        CountingEmbedder.texts += len(texts)
        return CountingEmbedder.shared.encode(texts)


def small_labels_folder(folder: Path) -> int:
    """~90 records copied from taxonomy/labels: the shortest issues of each class (texts from the snapshot or the
    labeler's summary), as the same JSON lines."""
    snap = snapshot_index()
    records, seen = [], set()
    for path in label_files():
        for r in read_labels(path):
            key = (canonical_repo(r["repo"]), int(r["number"]))
            if key in seen or ("text" not in r and key not in snap):
                continue
            seen.add(key)
            text = (r.get("title") or "") + (r.get("text") or "") if "text" in r else \
                (snap[key]["title"] or "") + (snap[key]["body"] or "")
            records.append((len(text), r))
    chosen = []
    for c in re_class_ids():
        chosen += sorted((x for x in records if x[1]["re_class"] == c), key=lambda x: (x[0], x[1]["number"]))[
            :30 if c == "none" else 15]
    folder.mkdir()
    (folder / "small.jsonl").write_text("".join(json.dumps(r) + "\n" for _, r in chosen))
    return len(chosen)


def test_model_settings_are_the_heads_votes_and_both_thresholds_and_name_a_missing_head():
    from retriage.classifier.train import model_settings

    hp = {"re_class": {"C": 4.0, "sparse_weight": 2.0, "lexical_C": 10.0, "lexical_blend": 0.3, "none_weight": 0.8},
          "component": {"C": 2.0, "sparse_weight": 2.0},
          "known_fix": {"C": 8.0, "sparse_weight": 2.0, "threshold": 0.3},
          "nearest_labels": {"k": 20, "temperature": 0.05, "balance": 0.5, "weight": 0.4, "folds_score": 0.77}}
    got = model_settings({"hyperparameters": hp, "threshold": 0.48})
    assert got == {**{k: hp[k] for k in ("re_class", "component", "known_fix")}, "abstain_threshold": 0.48,
                   "nearest_labels": {"k": 20, "temperature": 0.05, "balance": 0.5, "weight": 0.4}}
    older = model_settings({"hyperparameters": {**hp, "known_fix": {"C": 8.0, "sparse_weight": 2.0},
                                                "nearest_labels": None}, "fix_threshold": 0.25, "threshold": 0.5})
    assert older["known_fix"]["threshold"] == 0.25 and older["nearest_labels"] == {"weight": 0.0}
    with pytest.raises(ValueError, match="component head"):
        model_settings({"hyperparameters": {**hp, "component": {"C": 2.0}}})


def test_train_end_to_end_then_retrain_embeds_nothing(tmp_path):
    from retriage.classifier.train import train
    from retriage.db.store import connect

    n = small_labels_folder(tmp_path / "labels")
    shipped_files = {p.name: p.read_bytes() for p in shipped_model_dir().iterdir() if p.is_file()}
    con = connect(str(tmp_path / "cache.duckdb"))

    CountingEmbedder.texts = 0
    started = time.perf_counter()
    first = train(con, tmp_path / "labels", tmp_path / "m1", embedder=CountingEmbedder(), unlabeled=[])
    seconds = time.perf_counter() - started
    embedded = CountingEmbedder.texts
    stored = con.execute("SELECT count(*) FROM embeddings").fetchone()[0]
    print(f"\ntrain on {n} labels: {embedded} texts embedded, {stored} cached, {seconds:.1f} s")
    assert first.n_train == n and first.n_dev > 0, "fitted on every label, the dev split included"
    assert 0 < embedded <= 3 * n and stored == embedded

    model = IssueClassifier.load(tmp_path / "m1")
    assert model.version == first.version == json.loads((tmp_path / "m1" / "meta.json").read_text())["model_version"]
    assert set(model.meta["dev"]) >= {"re_class_macro_f1", "component_macro_f1", "coverage"}
    assert 0 <= model.threshold < 1
    # the fast head of `retriage classify` is distilled beside it, for this model only
    from retriage.classifier.fast_path import FastHead

    head, why = FastHead.load(tmp_path / "m1", model.version)
    assert head is not None, why
    assert head.meta["dev"]["n"] == first.n_dev and 0 <= head.meta["dev"]["re_agreement"] <= 1
    assert FastHead.load(tmp_path / "m1", "m-000000000000")[0] is None

    CountingEmbedder.texts = 0
    second = train(con, tmp_path / "labels", tmp_path / "m2", embedder=CountingEmbedder(), unlabeled=[])
    assert CountingEmbedder.texts == 0, "a retrain on the same database must not embed again"
    assert con.execute("SELECT count(*) FROM embeddings").fetchone()[0] == stored
    with np.load(tmp_path / "m1" / "weights.npz") as a, np.load(tmp_path / "m2" / "weights.npz") as b:
        assert a.files == b.files and all(np.allclose(a[k], b[k], atol=1e-6) for k in a.files)
    assert second.model.threshold == first.model.threshold

    # the model trained here predicts what the heads say, on the training texts it has seen
    items = load_gold(tmp_path / "labels")
    v = [views(e.title, e.body) for e in items[:5]]
    emb = [np.vstack([CountingEmbedder.shared.encode([getattr(x, f)]) for x in v]) for f in VIEW_FIELDS]
    dense = dense_features(emb, v)
    probs = model.re_head.predict_proba(dense, [model.tfidf.transform_one(x.lexical) for x in v])
    assert [p.re_class for p in model.predict(v, emb)] == [model.re_head.classes_[i] for i in probs.argmax(1)]

    # the dev figures are the held-out fit's (saved beside the model), which never saw the dev split
    from retriage.classifier.dataset import split as dev_split
    from retriage.classifier.embedding_cache import embed_views
    from retriage.classifier.metrics import macro_f1
    from retriage.core.errors import UserError

    held_out = model.held_out()
    assert held_out.folder == tmp_path / "m1" / "held_out" and held_out.version == model.meta["held_out_version"]
    train_side, dev = dev_split(items)
    assert held_out.meta["n_train"] == len(train_side) and model.meta["n_train"] == len(items)
    dv = [views(e.title, e.body) for e in dev]
    dv_emb = embed_views(con, dv)
    got = macro_f1([e.re_class for e in dev], [p.re_class for p in held_out.predict(dv, dv_emb)], re_class_ids())
    assert abs(got - model.meta["dev"]["re_class_macro_f1"]) < 1e-6
    with np.load(tmp_path / "m1" / "weights.npz") as a, np.load(tmp_path / "m1" / "held_out" / "weights.npz") as b:
        assert not np.allclose(a["re_w_dense"], b["re_w_dense"]), "the model is refitted with the dev split"
    # without the refit, the model is its own held-out fit
    third = train(con, tmp_path / "labels", tmp_path / "m3", embedder=CountingEmbedder(), unlabeled=[], refit=False)
    assert third.n_train == len(train_side) and not (tmp_path / "m3" / "held_out").exists()
    assert third.model.held_out() is third.model
    (tmp_path / "m1" / "held_out" / "weights.npz").unlink()
    with pytest.raises(UserError, match="held-out model is missing"):
        IssueClassifier.load(tmp_path / "m1").held_out()

    assert {p.name: p.read_bytes() for p in shipped_model_dir().iterdir() if p.is_file()} == shipped_files


def test_fix_threshold_is_the_highest_that_keeps_the_recall():
    from retriage.classifier.settings_search import highest_keeping_recall

    # recall falls as the threshold rises; the rule keeps the most precise threshold still at the floor
    recalls = {0.15: 0.90, 0.25: 0.82, 0.4: 0.80, 0.6: 0.67, 0.9: 0.30}
    assert highest_keeping_recall(recalls, 0.80) == 0.4
    assert highest_keeping_recall(recalls, 0.81) == 0.25
    assert highest_keeping_recall(recalls, 0.95) == 0.15  # none reaches it: the lowest, the best recall there is
    assert highest_keeping_recall({0.3: 0.85, 0.5: 0.85}, 0.80) == 0.5


def fold_of(gold, n: int, with_fix: int):
    """X and y of a few hundred labeled issues (`with_fix` of them with a known fix), their views and embeddings,
    and one fold: (fitted on, scored on) rows."""
    from retriage.classifier.snapshot_cache import shipped_embedder
    from retriage.classifier.train import Issues, labels_of

    fixed = [e for e in gold if e.known_fix != "none"][:with_fix]
    every = list({e.key: e for e in sorted(gold[:n] + fixed, key=lambda e: e.key)}.values())
    v = [views(e.title, e.body) for e in every]
    emb = shipped_embedder()(v)
    X, y = Issues.of(every, v, dense_features(emb, v)), labels_of(every)
    val = [i for i in range(len(every)) if i % 3 == 0]
    return every, v, emb, X, y, ([i for i in range(len(every)) if i % 3], val)


@pytest.mark.filterwarnings("ignore:The least populated class:UserWarning")  # rare fix tags in a small set
def test_the_folds_thresholds_see_what_a_model_fitted_on_the_fold_shows(gold, shipped):
    """threshold_scores fits the model on each fold's other issues; the model fitted on the same issues with the
    same settings must show the same fixes (rules, then the head's tag over the threshold) on the fold's issues,
    and count the same resource bugs with those under the abstain threshold set aside as unsure."""
    from retriage.classifier.metrics import counted_detection
    from retriage.classifier.predict import fixes_for
    from retriage.classifier.settings_search import ABSTAIN_THRESHOLDS, FIX_THRESHOLDS, fix_counts, threshold_scores
    from retriage.classifier.train import fit_classifier

    every, v, emb, X, y, (train, val) = fold_of(gold, 600, 60)
    settings = {k: shipped.meta["hyperparameters"][k] for k in ("re_class", "component", "known_fix", "nearest_labels")}
    recalls, counted = threshold_scores(X, y, [(train, val)], settings)
    assert recalls.shape == (1, len(FIX_THRESHOLDS)) and counted.shape == (1, len(ABSTAIN_THRESHOLDS), 2)

    model = fit_classifier([every[i] for i in train], [v[i] for i in train], [x[train] for x in emb], settings)
    assert model.nearest_labels is not None and model.fix_head is not None
    preds = model.predict([v[i] for i in val], [x[val] for x in emb])
    want = [{every[i].known_fix} - {"none"} for i in val]
    assert sum(map(bool, want)) >= 10
    for j, t in enumerate(FIX_THRESHOLDS):
        for p in preds:
            p.fix_threshold = t
        got = [set(fixes_for(v[i], every[i].engine, p)) for i, p in zip(val, preds)]
        assert recalls[0, j] == pytest.approx(fix_counts(want, got)[1], abs=1e-9), t
    assert list(recalls[0]) == sorted(recalls[0], reverse=True) and recalls[0, 0] > recalls[0, -1]
    gold_re, got = [every[i].re_class for i in val], [p.re_class for p in preds]
    assert sum(g != "none" for g in gold_re) >= 30
    for j, t in enumerate(ABSTAIN_THRESHOLDS):
        d = counted_detection(gold_re, got, [p.re_confidence < t for p in preds])
        assert list(counted[0, j]) == [d["precision"], d["recall"]], t
    found = list(counted[0, :, 1])  # recall falls as more issues are set aside
    assert found == sorted(found, reverse=True) and found[0] > found[-1]


def test_fix_setting_is_the_best_f1_to_two_places_then_the_best_recall():
    from retriage.classifier.settings_search import best_fix_setting

    totals = {(1.0, 1.0): np.array([0.4149, 0.70]), (2.0, 1.0): np.array([0.4101, 0.78]),
              (4.0, 1.0): np.array([0.4049, 0.95])}
    assert best_fix_setting(totals) == (2.0, 1.0)  # 0.41 either way: the better recall
    totals[(8.0, 2.0)] = np.array([0.4160, 0.10])
    assert best_fix_setting(totals) == (8.0, 2.0)  # 0.42 beats 0.41 whatever the recall
    assert best_fix_setting({(1.0, 1.0): np.array([0.5, 0.8]), (2.0, 1.0): np.array([0.5, 0.8])}) == (1.0, 1.0)


@pytest.mark.filterwarnings("ignore:The least populated class:UserWarning")
def test_the_fix_settings_fold_scores_are_what_a_head_fitted_on_the_fold_shows(gold, shipped):
    """fix_fold_scores fits an uncalibrated fix head per setting on each fold's other issues; the model's fix head
    fitted (uncalibrated) on the same issues with that setting, with the rules' tags, must show the same fixes."""
    from retriage.classifier.model import engine_fix
    from retriage.classifier.settings_search import C_GRID, SPARSE_WEIGHTS, fix_counts, fix_fold_scores
    from retriage.classifier.train import fit_classifier

    every, v, emb, X, y, (train, val) = fold_of(gold, 300, 60)
    totals = fix_fold_scores(X, y, [(train, val)])
    assert set(totals) == {(c, sw) for c in C_GRID for sw in SPARSE_WEIGHTS}

    want = [{every[i].known_fix} - {"none"} for i in val]
    assert sum(map(bool, want)) >= 10
    heads = {k: shipped.meta["hyperparameters"][k] for k in ("re_class", "component")}
    for c, sw in ((C_GRID[0], SPARSE_WEIGHTS[0]), (C_GRID[-1], SPARSE_WEIGHTS[-1])):
        model = fit_classifier([every[i] for i in train], [v[i] for i in train], [x[train] for x in emb],
                               {**heads, "known_fix": {"C": c, "sparse_weight": sw}}, calibrate=False)
        preds = model.predict([v[i] for i in val], [x[val] for x in emb])
        got = [set(v[i].fixes(every[i].engine)) | ({engine_fix(p.fix_probs, every[i].engine)[0]} - {"none"})
               for i, p in zip(val, preds)]
        assert totals[(c, sw)] == pytest.approx(np.array(fix_counts(want, got)), abs=1e-9), (c, sw)
    assert len({round(float(t[0]), 6) for t in totals.values()}) > 1  # the settings differ in what they show


def test_abstain_threshold_is_the_lowest_that_keeps_every_fold_precise():
    from retriage.classifier.settings_search import lowest_keeping_precision

    def folds(*precisions):
        return [{"precision": p, "recall": 0.5} for p in precisions]

    # precision rises with the threshold; the rule keeps the lowest (the most resource bugs counted) at which no
    # fold falls under the floor, not the one where their mean first reaches it
    per_fold = {0.0: folds(0.85, 0.75), 0.4: folds(0.90, 0.79), 0.5: folds(0.90, 0.80), 0.6: folds(0.95, 0.90)}
    assert lowest_keeping_precision(per_fold, 0.80) == 0.5
    assert lowest_keeping_precision(per_fold, 0.75) == 0.0
    assert lowest_keeping_precision(per_fold, 0.95) == 0.6  # none keeps it: the highest, the most precise there is
    assert lowest_keeping_precision({0.0: folds(0.9), 0.5: folds(0.7), 0.6: folds(0.85)}, 0.80) == 0.0
    assert lowest_keeping_precision({0.0: [], 0.5: [], 0.9: []}, 0.80) == 0.0  # no folds to judge by: never abstain
