"""`retriage label`, `show`, `predict` and `eval` as a user runs them, on real corpus issues in a temporary DuckDB.

The database (conftest.labeled_db) is labeled once per session with the shipped model and sentence-transformers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pytest

from conftest import ROOT, run_cli
from retriage.classifier import current_model_name, current_model_version
from retriage.classifier.dataset import load_gold, split
from retriage.classifier.model import IssueClassifier
from retriage.taxonomy import component_ids, fix_tag_ids, re_class_ids

pytestmark = pytest.mark.slow  # fresh interpreters, the real model or a training run: the full tier only

PREDICT_KEYS = {"repo", "number", "re_class", "re_confidence", "component", "component_confidence", "known_fixes",
                "abstained"}


@pytest.fixture(scope="module")
def shipped():
    return IssueClassifier.load()


def rows(db: Path, sql: str, params=None) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def one_line_error(proc) -> None:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("retriage: error:"), proc.stderr


# ---- label --------------------------------------------------------------------------------------------------------
def test_label_labels_every_issue_but_pull_requests(labeled_db, shipped):
    print(f"\nretriage label on {len(labeled_db.records)} records took {labeled_db.seconds:.1f} s")
    (issues,), (prs,) = (rows(labeled_db.path, "SELECT count(*) FROM issues WHERE NOT is_pull_request")[0],
                         rows(labeled_db.path, "SELECT count(*) FROM issues WHERE is_pull_request")[0])
    assert issues == len(labeled_db.records) - 1 and prs == 1
    first = dict(labeled_db.first_run)
    # the search and similar-issue indexes are built for what was labeled (none when an identical one is cached)
    assert {b["kind"] for b in first.pop("indexes_built")} <= {"search", "similar"}
    assert first == {"labeled": issues, "already_labeled": 0, "model_version": shipped.version}
    labeled = rows(labeled_db.path, "SELECT repo, number FROM predictions WHERE model_version = ?", [shipped.version])
    assert len(labeled) == len(set(labeled)) == issues
    assert labeled_db.pr not in set(labeled)
    assert "Traceback" not in labeled_db.first_run_stderr


def test_second_label_run_labels_nothing(labeled_db, shipped):
    before = rows(labeled_db.path, "SELECT (SELECT count(*) FROM predictions), (SELECT count(*) FROM embeddings), "
                                   "(SELECT max(labeled_at) FROM predictions)")[0]
    proc = run_cli("label", "--json", db=labeled_db.path)
    assert proc.returncode == 0, proc.stderr
    n = len(labeled_db.records) - 1
    second = json.loads(proc.stdout)
    second.pop("indexes_built")
    assert second == {"labeled": 0, "already_labeled": n, "model_version": shipped.version}
    after = rows(labeled_db.path, "SELECT (SELECT count(*) FROM predictions), (SELECT count(*) FROM embeddings), "
                                  "(SELECT max(labeled_at) FROM predictions)")[0]
    assert after == before


def test_prediction_rows(labeled_db, shipped):
    assert shipped.version == current_model_version()
    preds = rows(labeled_db.path, "SELECT repo, number, re_class, component, confidence, component_confidence, "
                                  "abstained, known_fixes, model_version FROM predictions")
    tags = set(fix_tag_ids()) - {"none"}
    for repo, number, re_class, component, conf, comp_conf, abstained, fixes, version in preds:
        assert version == shipped.version
        assert re_class in re_class_ids() and component in component_ids()
        assert 0.0 <= conf <= 1.0 and 0.0 <= comp_conf <= 1.0
        assert abstained == (conf < shipped.threshold), (repo, number, conf)
        assert set(fixes) <= tags and len(fixes) == len(set(fixes)), (repo, number, fixes)
    stored = {(r[0], r[1]): r[7] for r in preds}
    assert any(stored.values()), "no issue got a known fix"
    agree = [(repo, number, tag, stored[(repo, number)]) for repo, number, tag in labeled_db.team]
    print("\nteam known fix vs stored known_fixes:", agree)
    assert any(tag in fixes for _, _, tag, fixes in agree)


def test_embeddings_are_stored_for_similar_issues(labeled_db):
    vectors = rows(labeled_db.path, """SELECT ie.repo, ie.number, e.vector FROM issue_embeddings ie
                                       JOIN embeddings e ON e.text_hash = ie.text_hash AND e.model = ie.model
                                       WHERE ie.model = ?""", [current_model_name()])
    assert len(vectors) == len(labeled_db.records) - 1
    norms = np.linalg.norm(np.array([v for _, _, v in vectors], dtype=np.float32), axis=1)
    assert np.allclose(norms, 1.0, atol=1e-3)


def test_show_displays_class_component_confidence_and_similar(labeled_db, shipped):
    repo, number, _ = labeled_db.team[-1]
    ref = f"https://github.com/{repo}/issues/{number}"
    data = json.loads(run_cli("show", ref, "--json", db=labeled_db.path).stdout)
    p = data["prediction"]
    assert p["model_version"] == shipped.version
    assert p["re_class"] in re_class_ids() and p["component"] in component_ids() and 0 <= p["confidence"] <= 1
    from retriage.db.similar import FLOOR

    assert len(data["similar"]) <= 5  # none below the floor (tests/test_search.py checks what is found)
    assert all((s["repo"], s["number"]) != (repo, number) for s in data["similar"])
    scores = [s["score"] for s in data["similar"]]
    assert scores == sorted(scores, reverse=True) and all(FLOOR <= s <= 1.0001 for s in scores)
    text = run_cli("show", ref, db=labeled_db.path)
    assert text.returncode == 0, text.stderr
    out = " ".join(text.stdout.split())
    assert f"predicted class {p['re_class']}" in out and f"conf {p['confidence']:.2f}" in out
    assert f"component {p['component']}" in out and ("similar issues" in out) == bool(data["similar"])


# ---- predict ------------------------------------------------------------------------------------------------------
def api_shape(r: dict) -> dict:
    """A corpus record in the GitHub REST API's shape: labels as objects, a user, no `repo` field."""
    out = {k: v for k, v in r.items() if k != "repo"}
    out["labels"] = [{"name": n} for n in r.get("labels") or []]
    out["user"] = {"login": "someone"}
    out["repository_url"] = f"https://api.github.com/repos/{r['repo']}"
    return out


def test_predict_contract(labeled_db, shipped, tmp_path):
    labeled = {(r[0], r[1]): r[2:] for r in rows(
        labeled_db.path, "SELECT repo, number, re_class, confidence, abstained FROM predictions")}
    unsure = [k for k, v in labeled.items() if v[2] and v[1] < shipped.threshold - 0.05]
    sure = [k for k, v in labeled.items() if not v[2] and v[1] > shipped.threshold + 0.05]
    assert unsure, "the labeled slice has no issue the model is unsure about"
    by_key = {(r["repo"], r["number"]): r for r in labeled_db.records}
    chosen = unsure[:3] + sure[:3]
    records = [by_key[k] for k in chosen]
    records[1] = api_shape(records[1])
    records[-1] = api_shape(records[-1])
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "out.jsonl"
    proc = run_cli("predict", "--input", str(src), "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    lines = out.read_text().splitlines()
    assert len(lines) == len(records)
    for key, line in zip(chosen, lines):
        p = json.loads(line)
        assert set(p) == PREDICT_KEYS
        assert (p["repo"], p["number"]) == key
        assert p["re_class"] in re_class_ids() and p["component"] in component_ids()
        assert isinstance(p["abstained"], bool) and p["abstained"] == (p["re_confidence"] < shipped.threshold)
        assert 0 <= p["re_confidence"] <= 1 and 0 <= p["component_confidence"] <= 1
        assert set(p["known_fixes"]) <= set(fix_tag_ids())
        # the numpy port in `predict` and sentence-transformers in `label` give the same answer
        re_class, confidence, abstained = labeled[key]
        assert (p["re_class"], p["abstained"]) == (re_class, abstained)
        assert abs(p["re_confidence"] - confidence) < 0.02
    assert any(json.loads(x)["abstained"] for x in lines)


BAD_INPUTS = {
    "not json": '{"repo": "vllm-project/vllm", "number": 1, "title": "a", "body": "b"}\n{"repo": \n',
    "no number": '{"repo": "vllm-project/vllm", "title": "a", "body": "b"}\n',
    "not an object": '["vllm-project/vllm", 1]\n',
    "no repository": '{"number": 5, "title": "a", "body": "b"}\n',
}


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_predict_bad_input_is_one_line_and_leaves_output_alone(tmp_path, name):
    src = tmp_path / "in.jsonl"
    src.write_text(BAD_INPUTS[name])
    existing = tmp_path / "existing.jsonl"
    existing.write_text("earlier results\n")
    proc = run_cli("predict", "--input", str(src), "--output", str(existing))
    one_line_error(proc)
    assert existing.read_text() == "earlier results\n"
    fresh = tmp_path / "fresh.jsonl"
    one_line_error(run_cli("predict", "--input", str(src), "--output", str(fresh)))
    assert not fresh.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing.jsonl", "in.jsonl"]


def test_predict_missing_input_or_output_folder(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text('{"repo": "vllm-project/vllm", "number": 1, "title": "a", "body": "b"}\n')
    one_line_error(run_cli("predict", "--input", str(tmp_path / "nope.jsonl"), "--output", str(tmp_path / "o.jsonl")))
    one_line_error(run_cli("predict", "--input", str(src), "--output", str(tmp_path / "no" / "o.jsonl")))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


# ---- eval ---------------------------------------------------------------------------------------------------------
def small_gold() -> list:
    """The two shortest dev-split issues of each class, as the team labeled them."""
    _, dev = split(load_gold())
    gold = []
    for c in re_class_ids():
        gold += sorted((e for e in dev if e.re_class == c and e.source == "corpus"),
                       key=lambda e: (len(e.title) + len(e.body), e.number))[:2]
    return gold


@pytest.fixture(scope="module", autouse=True)
def eval_run(tmp_path_factory):
    """`retriage eval --gold F --json`, started when this module starts: its TF-IDF baseline trains on the whole
    labeled set and takes most of a minute on two cores, so it runs beside the other tests of the module."""
    folder = tmp_path_factory.mktemp("eval")
    gold = small_gold()
    path = folder / "gold.jsonl"
    path.write_text("".join(json.dumps({"repo": e.repo, "number": e.number, "re_class": e.re_class,
                                        "component": e.component}) + "\n" for e in gold))
    env = {k: v for k, v in os.environ.items() if k != "RETRIAGE_DB"}
    env["HF_HUB_OFFLINE"] = "1"
    proc = subprocess.Popen([sys.executable, "-m", "retriage.cli", "eval", "--gold", str(path), "--json",
                             "--db", str(folder / "eval.duckdb")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=str(ROOT))
    yield gold, proc
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


def test_eval_json_prints_model_and_three_baselines(eval_run):
    from sklearn.metrics import f1_score

    gold, proc = eval_run
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr
    report = json.loads(stdout)
    team = load_gold()
    assert {e.re_class for e in gold} == set(re_class_ids())
    assert report["n"] == len(gold) and report["n_train"] == len(team) - len(gold)
    assert report["seen_in_training"] == len(gold), "the shipped model is fitted on the dev split too"
    engines = report["summary"]["model_per_engine"]  # the gold issues' figures per engine, as the splits have
    assert set(engines) == {e.engine for e in gold}
    assert sum(d["n"] for d in engines.values()) == len(gold)
    for engine, d in engines.items():
        mine = [e for e in gold if e.engine == engine]
        assert d["detection"]["positives"] == sum(e.re_class != "none" for e in mine), engine
    for target in ("re_class", "component"):
        systems = report["scores"][target]
        assert set(systems) == {"model", "majority", "keyword_rules", "tfidf_logreg"}
        for s in systems.values():
            assert 0.0 <= s["macro_f1"] <= 1.0
            assert sum(map(sum, s["confusion"])) == len(gold)
        # the majority baseline, recomputed here from the team's labels outside the gold file
        keys = {e.key for e in gold}
        train = [getattr(e, target) for e in team if e.key not in keys]
        majority = max(set(train), key=train.count)
        y = [getattr(e, target) for e in gold]
        labels = sorted(set(y) | {majority})
        want = f1_score(y, [majority] * len(y), labels=labels, average="macro", zero_division=0)
        assert systems["majority"]["macro_f1"] == pytest.approx(want, abs=1e-4)
    print("\neval on", len(gold), "dev-split issues:",
          {t: {k: v["macro_f1"] for k, v in report["scores"][t].items()} for t in report["scores"]})


def test_eval_bad_gold_file_is_one_line(tmp_path):
    path = tmp_path / "gold.jsonl"
    path.write_text('{"repo": "vllm-project/vllm", "number": 1, "re_class": "RE.9", "component": "other"}\n')
    one_line_error(run_cli("eval", "--gold", str(path), db=tmp_path / "x.duckdb"))


def test_a_gold_files_issues_are_counted_by_where_their_text_came_from(tmp_path):
    """eval --gold says where each issue's text came from: its own body (a real-issue record), a summary's
    `text`, or the bundled snapshot (a corpus issue); it never calls a record with its own body a corpus issue."""
    from retriage.classifier.dataset import snapshot_index
    from retriage.classifier.evaluation import read_gold

    corpus_key = next(iter(snapshot_index()))
    path = tmp_path / "gold.jsonl"
    lines = [{"repo": "NVIDIA/TensorRT-LLM", "number": 9, "title": "t", "body": "CUDA out of memory",
              "re_class": "RE.1", "component": "engine_setup"},
             {"repo": "NVIDIA/TensorRT-LLM", "number": 10, "text": "a summary", "re_class": "none",
              "component": "other"},
             {"repo": corpus_key[0], "number": corpus_key[1], "re_class": "none", "component": "other"}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert [e.source for e in read_gold(path)] == ["real", "external", "corpus"]


def test_the_fix_heads_memory_tag_is_the_engines_own():
    """The fix head reads no engine; its memory-exhausted tag is shown as the issue's engine's own fix, after
    the rules' tags, and a rule's tag is not repeated."""
    from retriage.classifier.features import views
    from retriage.classifier.model import Prediction
    from retriage.classifier.predict import fixes_for

    plain = views("Crash after loading", "The server stops while the model loads; nothing is printed.")
    pred = Prediction("RE.1", 0.9, "model_loader", 0.8, False, known_fix="oom_four_step", known_fix_confidence=0.7)
    assert fixes_for(plain, "llama.cpp", pred) == ["llamacpp_offload"]
    assert fixes_for(plain, "vllm", pred) == ["oom_four_step"]
    assert fixes_for(plain, "llama.cpp", Prediction("RE.1", 0.9, "model_loader", 0.8, False)) == []
    oom = views("OOM", "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000.00 MiB on device 0: "
                       "cudaMalloc failed: out of memory")
    assert fixes_for(oom, "llama.cpp", pred) == ["llamacpp_offload"]


def test_the_memory_tags_probabilities_are_pooled_on_the_issues_engine():
    """Device memory exhausted is one phenomenon with an engine's own tag: the fix head's probabilities of the
    two tags add up for the issue's engine, and that sum picks the tag (here over the arch tag, which each
    memory tag alone loses to); without an engine nothing is pooled. The confidence is the probability that
    some fix applies, 1 - P("none")."""
    from retriage.classifier.model import Prediction

    pred = Prediction("RE.1", 0.9, "model_loader", 0.8, False, known_fix="none", fix_threshold=0.3,
                      fix_probs={"none": 0.4, "cuda_arch_mismatch": 0.28, "oom_four_step": 0.17,
                                 "llamacpp_offload": 0.15})
    assert pred.fix_for("llama.cpp") == ("llamacpp_offload", 0.6)
    assert pred.fix_for("trtllm") == ("oom_four_step", 0.6)
    assert pred.fix_for(None) == ("cuda_arch_mismatch", 0.6)
    pred.fix_threshold = 0.7
    assert pred.fix_for("llama.cpp") == ("none", 0.0)


def test_whether_a_fix_applies_is_decided_apart_from_which():
    """A "none" that beats every tag alone but not the tags together leaves the likeliest tag standing (the
    head is 0.6 sure some fix applies); a head sure of "none" names its likeliest tag only at a threshold at or
    below 1 - P("none")."""
    from retriage.classifier.model import Prediction

    split = Prediction("RE.3", 0.9, "operators", 0.8, False, fix_threshold=0.5,
                       fix_probs={"none": 0.4, "nccl_debug": 0.35, "enforce_eager": 0.25})
    assert split.fix_for("vllm") == ("nccl_debug", 0.6)
    sure = Prediction("RE.3", 0.9, "operators", 0.8, False, fix_threshold=0.02,
                      fix_probs={"none": 0.97, "nccl_debug": 0.02, "enforce_eager": 0.01})
    assert sure.fix_for("vllm") == ("nccl_debug", 0.03)
    sure.fix_threshold = 0.05
    assert sure.fix_for("vllm") == ("none", 0.0)
