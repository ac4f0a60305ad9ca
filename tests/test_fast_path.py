"""The fast path of `retriage classify` (classifier/fast_path.py): distilled from the shipped model, gated, and
measured against the full model on real issues and traces."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli
from retriage.classifier.dataset import load_gold, split
from retriage.classifier.embed import text_hash
from retriage.classifier.fast_path import FAST_META, FastHead, margins
from retriage.classifier.features import VIEW_FIELDS, views
from retriage.classifier.model import IssueClassifier, shipped_model_dir
from retriage.classifier.snapshot_cache import cache_path
from retriage.classifier.static_embed import StaticMiniLM

pytestmark = pytest.mark.slow  # fresh interpreters, the real model or a training run: the full tier only

TRACES = Path(__file__).resolve().parent / "data" / "traces"


@pytest.fixture(scope="module")
def model():
    return IssueClassifier.load()


@pytest.fixture(scope="module")
def head(model):
    h, why = FastHead.load(shipped_model_dir(), model.version)
    assert h is not None, why
    return h


@pytest.fixture(scope="module")
def static():
    return StaticMiniLM()


@pytest.fixture(scope="module")
def dev_with_vectors():
    """Dev-split corpus issues with their MiniLM view vectors from the snapshot's shipped cache (no embedding)."""
    with np.load(cache_path(), allow_pickle=False) as a:
        cache = dict(zip(a["hashes"].tolist(), a["vectors"].astype(np.float32)))
    _, dev = split(load_gold())
    v = [views(e.title, e.body) for e in dev if e.source == "corpus"]
    v = [x for x in v if all(text_hash(getattr(x, f)) in cache for f in VIEW_FIELDS)]
    emb = [np.vstack([cache[text_hash(getattr(x, f))] for x in v]) for f in VIEW_FIELDS]
    return v, emb


def test_shipped_fast_head_belongs_to_the_shipped_model(model, head, static):
    meta = json.loads((shipped_model_dir() / FAST_META).read_text())
    assert meta["teacher_model_version"] == model.version
    assert 0 <= head.re_margin < 1 and 0 <= head.component_margin < 1
    width = len(VIEW_FIELDS) * static.table.shape[1]  # the static vectors of the three views side by side
    assert head.w_static.shape == (width, 11) and head.w_sim.shape == head.w_vote.shape == (width, 384)
    assert len(head.idf) == static.table.shape[0]
    assert FastHead.load(shipped_model_dir(), "m-000000000000")[0] is None


def test_gate_follows_the_margins(model, head, static, dev_with_vectors):
    v, _ = dev_with_vectors
    avgs, ids = head.static_features(static, v[:60])
    lex = model.lexical_logits(v[:60])
    p_re, p_comp = head.probabilities(model, *(a + b for a, b in zip(lex, head.embedding_logits(avgs, ids))), avgs)
    gate = head.confident(p_re, p_comp)
    assert np.array_equal(gate, (margins(p_re) >= head.re_margin) & (margins(p_comp) >= head.component_margin))
    assert 0 < gate.sum() < len(gate)


def test_the_fast_answer_takes_the_votes_of_the_labeled_issues_nearest_its_estimate(model, head, static,
                                                                                     dev_with_vectors):
    """The full model mixes in the nearest labeled issues' votes; the fast head estimates the issue's vote vector
    from its static features, so its answers take votes too. On dev issues (never in the distillation set) the
    estimate must point where the MiniLM vector does, and the votes must bring the fast answer closer to the full
    model's than the heads alone."""
    from retriage.classifier.nearest_labels import representation

    v, emb = dev_with_vectors
    avgs, ids = head.static_features(static, v)
    est = head.vote_vector(avgs)
    cosine = (representation([est]) * representation(emb)).sum(1)
    lex_re, lex_comp = model.lexical_logits(v)
    f_re, f_comp = head.embedding_logits(avgs, ids)
    with_votes = head.probabilities(model, lex_re + f_re, lex_comp + f_comp, avgs)
    alone = model.probabilities(lex_re + f_re, lex_comp + f_comp)
    e_re, e_comp = model.embedding_logits(emb)
    full = model.probabilities(lex_re + e_re, lex_comp + e_comp, emb)
    same = [[(p.argmax(1) == q.argmax(1)).mean() for p, q in zip(answer, full)] for answer in (with_votes, alone)]
    print(f"\n{len(v)} dev issues: mean cosine {cosine.mean():.3f}; same RE/component as the full model "
          f"{same[0][0]:.3f}/{same[0][1]:.3f} with votes, {same[1][0]:.3f}/{same[1][1]:.3f} heads alone")
    assert cosine.mean() >= 0.75
    assert not np.allclose(with_votes[0], alone[0])
    assert same[0][0] >= same[1][0] and same[0][1] >= same[1][1]


@pytest.fixture(scope="module")
def answers():
    """Every real trace answered by the fast path (gated) and by the full model."""
    from retriage.triage.classify import Triage

    fast, full = Triage(), Triage(fast=False)
    out = []
    for f in sorted(TRACES.glob("*.txt")):
        data = f.read_bytes()
        out.append((f.name, fast.run(data, similar=0), full.run(data, similar=0)))
    return out


def test_real_traces_fast_and_full_agree(answers):
    """The traces took no part in fitting the fast head or choosing its gate (the dev split did), so this can
    fail: agreement asserted on the dev split itself could not."""
    n = len(answers)
    fast = [a for _, a, _ in answers if a.fast_path]
    same = sum(a.re_class == b.re_class for _, a, b in answers)
    print(f"\n{n} real traces: {len(fast)} answered by the fast path, same RE class {same}/{n}")
    assert len(fast) >= 0.6 * n
    assert same >= 0.97 * n
    assert not any(b.fast_path for _, _, b in answers)
    for name, a, b in answers:  # everything but the class and component comes from the same rules
        assert (a.fixes, a.evidence, a.engine, a.exception) == (b.fixes, b.evidence, b.engine, b.exception), name
        if not a.fast_path:
            assert (a.re_class, a.re_confidence, a.component) == (b.re_class, b.re_confidence, b.component), name


def test_a_closed_gate_always_runs_the_full_model():
    from retriage.triage.classify import Triage

    tr = Triage()
    tr.fast_head.re_margin = 1.01  # no margin between probabilities is that wide
    data = (TRACES / "vllm_cuda_oom_1.txt").read_bytes()
    a, b = tr.run(data, similar=0), Triage(fast=False).run(data, similar=0)
    assert not a.fast_path and (a.re_class, a.re_confidence) == (b.re_class, b.re_confidence)


def test_cli_exact_flag():
    trace = str(TRACES / "vllm_cuda_oom_2.txt")
    fast = json.loads(run_cli("classify", trace, "--json", "--similar", "0").stdout)
    exact = json.loads(run_cli("classify", trace, "--json", "--similar", "0", "--exact").stdout)
    assert fast["fast_path"] and not exact["fast_path"] and fast["re_class"] == exact["re_class"] == "RE.1"
    assert not any("fast path" in n for n in fast["notes"] + exact["notes"])


def test_train_fast_only_distils_again_and_keeps_the_heads(tmp_path):
    import shutil

    from test_classifier import small_labels_folder

    small_labels_folder(tmp_path / "labels")
    model_dir = tmp_path / "model"
    shutil.copytree(shipped_model_dir(), model_dir)
    (model_dir / "fast.npz").unlink()
    (model_dir / "fast.json").unlink()
    heads = (model_dir / "weights.npz").read_bytes()
    proc = run_cli("train", "--fast-only", "--labels", str(tmp_path / "labels"), "--output", str(model_dir), "--json",
                   db=tmp_path / "t.duckdb", timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    model = IssueClassifier.load(model_dir)
    assert out["model_version"] == model.version == IssueClassifier.load().version
    assert (model_dir / "weights.npz").read_bytes() == heads
    head, why = FastHead.load(model_dir, model.version)
    assert head is not None, why
    assert out["fast_path"]["n"] == head.meta["dev"]["n"] > 0 and 0 <= out["fast_path"]["re_agreement"] <= 1


def test_an_unreadable_fast_head_falls_back_with_a_note(tmp_path, model):
    import shutil

    from retriage.triage.classify import Triage

    folder = tmp_path / "model"
    shutil.copytree(shipped_model_dir(), folder)
    (folder / "fast.npz").write_bytes(b"PK\x03\x04 broken")
    head, why = FastHead.load(folder, model.version)
    assert head is None and "unreadable" in why
    tr = Triage(IssueClassifier.load(folder))
    r = tr.run((TRACES / "vllm_cuda_oom_1.txt").read_bytes(), similar=0)
    assert not r.fast_path and r.re_class == "RE.1"
    assert any(n.startswith("fast path off:") and "unreadable" in n for n in r.notes)
