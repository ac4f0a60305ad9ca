"""One issue, one answer (classifier/decision.py): `label` (and its cascade), `predict`, `show`, `list` and the bot's
`comment` give the same class, abstention and known fixes for an issue; every stored prediction says how it was made
(schema version 4: prediction_provenance); a resource fix is never shown beside the class `none` without a one-line reason.

Real DuckDB files, the real rules and taxonomy; the real model where an answer is predicted (slow-marked)."""

from __future__ import annotations

import gzip
import json
import shutil
from datetime import datetime

import duckdb
import pytest
from typer.testing import CliRunner

from conftest import run_cli
from retriage.classifier.decision import FAST, FULL, MEASURED, decide
from retriage.classifier.model import Prediction
from retriage.cli import app
from retriage.db import store, writes
from retriage.taxonomy import fix_tag_classes, fix_tag_ids, resource_class_ids

VERSION = "m-test0000000"
OOM_LINE = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


def head(tag: str, p: float = 0.9) -> Prediction:
    """A prediction of class none whose fix head names `tag` with probability `p` (threshold 0.5)."""
    return Prediction("none", 0.93, "frontend", 0.8, False, fix_threshold=0.5,
                      fix_probs={"none": 1 - p, tag: p})


# ---- the decision ---------------------------------------------------------------------------------------------------
def test_fix_tags_that_imply_a_class_agree_with_the_rules():
    """taxonomy.toml's `implies` is the classes of the rules that give the tag: a tag implies resource classes
    exactly when no rule gives it with the class none, and then every class a rule gives it is among them."""
    from retriage.core.rules import default_rules

    implied = fix_tag_classes()
    assert set(implied) == {"ipc_host", "oom_four_step", "raise_kv_budget", "nccl_debug", "llamacpp_offload"}
    assert set(implied) <= set(fix_tag_ids())
    by_tag: dict[str, set] = {}
    for rule in default_rules()[0]:
        by_tag.setdefault(rule.tag, set()).update(
            c for c in (rule.re_class, rule.multi_device_class, rule.mixed_gpu_class) if c)
    for tag, classes in by_tag.items():
        if tag == "none":
            continue
        if tag in implied:
            assert classes <= set(implied[tag]) <= set(resource_class_ids()), tag
        else:
            assert "none" in classes, f"{tag}: every rule giving it names a resource class, but it implies none"


def test_the_fix_heads_resource_fix_beside_none_is_left_out_with_its_reason():
    d = decide(head("oom_four_step"), [], "vllm", None, VERSION, FULL)
    assert (d.re_class, d.abstained, d.known_fixes) == ("none", False, [])
    assert d.left_out == ["oom_four_step"] and d.head_fix == "none" and d.head_fix_confidence == 0.0
    assert d.note.startswith("fix oom_four_step (implies RE.1) left out beside the class none")
    assert f"{MEASURED['fix_right']} of {MEASURED['issues']}" in d.note and "\n" not in d.note
    assert d.made_by == f"model {VERSION} · MiniLM + fix oom_four_step left out beside none"
    # on llama.cpp the same head's tag is llama.cpp's own, and left out just the same
    assert decide(head("oom_four_step"), [], "llama.cpp", None, VERSION).left_out == ["llamacpp_offload"]


def test_a_rules_resource_fix_beside_none_stays_as_worth_checking():
    d = decide(head("oom_four_step"), ["nccl_debug", "enforce_eager"], "sglang", None, VERSION, FULL)
    assert d.re_class == "none" and d.known_fixes == ["nccl_debug", "enforce_eager"]
    assert d.worth_checking == ["nccl_debug"] and d.left_out == ["oom_four_step"]
    assert "worth checking: rule fix nccl_debug implies RE.3, the model says none (0.93)" in d.note
    assert d.made_by.endswith("+ fix oom_four_step left out beside none + fix nccl_debug worth checking beside none")


def test_beside_a_resource_class_or_a_non_resource_fix_nothing_changes():
    resource = head("oom_four_step")
    resource.re_class = "RE.1"
    d = decide(resource, ["raise_kv_budget"], "vllm", None, VERSION)
    assert (d.re_class, d.known_fixes, d.note, d.head_fix) == ("RE.1", ["raise_kv_budget", "oom_four_step"], None,
                                                                "oom_four_step")
    assert d.made_by == f"model {VERSION} · MiniLM"
    d = decide(head("enforce_eager"), ["cuda_arch_mismatch"], "vllm", None, VERSION)
    assert (d.re_class, d.known_fixes, d.note) == ("none", ["cuda_arch_mismatch", "enforce_eager"], None)


def test_the_mixed_gpu_rule_class_stands_and_the_fast_path_says_so():
    unsure = Prediction("none", 0.41, "engine_setup", 0.7, True)  # the fast path: no fix-head part
    d = decide(unsure, ["cuda_arch_mismatch"], "vllm", "RE.3", VERSION, FAST)
    assert (d.re_class, d.abstained, d.known_fixes, d.note) == ("RE.3", False, ["cuda_arch_mismatch"], None)
    assert d.made_by == f"model {VERSION} · fast path (static MiniLM) + rule mixed-GPU class"
    assert (unsure.re_class, unsure.abstained) == ("none", True)  # the model's own answer is left as it was


# ---- the store: schema version 4 ------------------------------------------------------------------------------------
ISSUES = [("vllm-project/vllm", 1, "Server stops", f"```\n{OOM_LINE}\n```"),
          ("vllm-project/vllm", 2, "Add a flag for the chat template", "It would help to set it per request."),
          ("vllm-project/vllm", 3, "Slow answers", "Nothing in the logs.")]


def version_3_database(path) -> None:
    """A database as schema version 3 left it, with three issues and their predictions (no provenance)."""
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT, applied_at TIMESTAMP)")
    for version, name, sql in store._migrations():
        if version <= 3:
            con.execute(sql)
            con.execute("INSERT INTO schema_version VALUES (?, ?, now()::TIMESTAMP)", [version, name])
    for repo, number, title, body in ISSUES:
        con.execute("INSERT INTO issues (repo, number, title, body, state, created_at, html_url) VALUES "
                    "(?, ?, ?, ?, 'open', TIMESTAMP '2025-01-02', ?)",
                    [repo, number, title, body, f"https://github.com/{repo}/issues/{number}"])
    con.executemany("INSERT INTO predictions VALUES (?, ?, ?, 'frontend', 0.9, 0.8, false, ?, ?, now()::TIMESTAMP)",
                    [["vllm-project/vllm", 1, "none", ["oom_four_step"], VERSION],
                     ["vllm-project/vllm", 2, "none", [], VERSION],
                     ["vllm-project/vllm", 3, "RE.1", ["oom_four_step"], VERSION]])
    con.close()


@pytest.fixture
def pin_model(monkeypatch):
    import retriage.classifier as clf

    monkeypatch.setattr(clf, "current_model_version", lambda folder=None: VERSION)


def test_a_version_3_database_reads_without_provenance_and_migrates_keeping_its_rows(tmp_path, pin_model):
    from retriage.lister import ListFilter, list_issues
    from retriage.lookup import lookup

    path = tmp_path / "v3.duckdb"
    version_3_database(path)
    con = store.connect(path, read_only=True)  # readers do not migrate
    assert store.schema_version(con) == 3
    info = lookup(con, "vllm#1", similar=0)
    assert info["prediction"]["made_by"] is None
    assert info["prediction"]["note"].startswith("worth checking: fix oom_four_step implies RE.1, the class is none")
    rows = {r["number"]: r for r in list_issues(con, ListFilter(limit=10), VERSION)}
    assert rows[1]["made_by"] is None and rows[1]["note"] == info["prediction"]["note"]
    assert rows[2]["note"] is None and rows[3]["note"] is None  # no fix, or a fix beside a resource class
    con.close()
    con = store.connect(path)
    assert store.schema_version(con) == max(v for v, _, _ in store._migrations())
    def columns(table):
        return [r[0] for r in con.execute("SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                                          "ORDER BY ordinal_position", [table]).fetchall()]
    assert columns("predictions") == list(writes.PREDICTION_COLUMNS)  # unchanged: inserts by position still work
    assert columns("prediction_provenance") == list(writes.PROVENANCE_COLUMNS)
    assert con.execute("SELECT count(*) FROM predictions").fetchone() == (3,)
    assert con.execute("SELECT count(*) FROM prediction_provenance").fetchone() == (0,)
    con.execute("INSERT INTO predictions SELECT repo, number, 'none', 'other', 0.5, 0.5, false, [], 'm-y', "
                "now()::TIMESTAMP FROM issues")
    with store.transaction(con):  # a row in the old shape still saves (how it was made: unknown)
        writes.save_predictions(con, [("vllm-project/vllm", 2, "RE.2", "scheduler", 0.7, 0.6, False, [], "m-x",
                                        datetime(2026, 1, 1))])
    from retriage.db import queries

    assert queries.latest_prediction(con, "vllm-project/vllm", 2, "m-x")["made_by"] is None
    with store.transaction(con):  # with how it was made; a later prediction of the same key replaces both
        writes.save_predictions(con, [("vllm-project/vllm", 2, "RE.2", "scheduler", 0.7, 0.6, False, [], "m-x",
                                        datetime(2026, 1, 2), "model m-x · MiniLM", None)])
    assert queries.latest_prediction(con, "vllm-project/vllm", 2, "m-x")["made_by"] == "model m-x · MiniLM"
    # a script that replaces the prediction without saying how: the old provenance does not describe it
    con.execute("UPDATE predictions SET labeled_at = TIMESTAMP '2026-02-01' WHERE model_version = 'm-x'")
    assert queries.latest_prediction(con, "vllm-project/vllm", 2, "m-x")["made_by"] is None
    con.close()


@pytest.fixture
def stored(tmp_path, pin_model):
    """A current database: the three issues, with predictions that record how they were made."""
    path = tmp_path / "v4.duckdb"
    version_3_database(path)
    con = store.connect(path)
    con.execute("DELETE FROM predictions")
    now = datetime(2026, 1, 1)
    with store.transaction(con):
        writes.save_predictions(con, [
            ("vllm-project/vllm", 1, "none", "frontend", 0.9, 0.8, False, ["oom_four_step"], VERSION, now,
             f"model {VERSION} · MiniLM + fix oom_four_step worth checking beside none",
             "worth checking: rule fix oom_four_step implies RE.1, the model says none (0.90)"),
            ("vllm-project/vllm", 2, "none", "frontend", 0.9, 0.8, False, [], VERSION, now,
             f"model {VERSION} · fast path (static MiniLM)", None)])
    con.close()
    return path


def test_show_and_list_expose_how_each_prediction_was_made_and_the_rules_advice(stored):
    runner = CliRunner()
    shown = runner.invoke(app, ["show", "vllm#1", "--offline", "--json", "--db", str(stored)])
    assert shown.exit_code == 0, shown.output
    info = json.loads(shown.stdout)
    p = info["prediction"]
    assert p["made_by"] == f"model {VERSION} · MiniLM + fix oom_four_step worth checking beside none"
    assert p["note"].startswith("worth checking: rule fix oom_four_step")
    assert {"re_class", "component", "confidence", "abstained", "known_fixes", "model_version"} <= set(p)
    advice = info["advice"]  # the first matching rule's fix, this engine's steps (as the bot gives them)
    assert advice[0]["source"] == "rule" and advice[0]["tag"] == "oom_four_step" and OOM_LINE in advice[0]["line"]
    assert any("--gpu-memory-utilization" in s for s in advice[0]["steps"])
    table = runner.invoke(app, ["show", "vllm#1", "--offline", "--db", str(stored)], env={"COLUMNS": "200"})
    text = " ".join(table.stdout.split())
    assert "made by model m-test0000000 · MiniLM + fix oom_four_step worth checking beside none" in text
    assert "note worth checking: rule fix oom_four_step implies RE.1" in text
    assert "known fix: GPU out of memory" in text and "1. If the OOM happens while serving, lower " \
        "`--gpu-memory-utilization`" in text
    plain = json.loads(runner.invoke(app, ["show", "vllm#2", "--offline", "--json", "--db", str(stored)]).stdout)
    assert plain["advice"] == [] and plain["prediction"]["note"] is None
    assert plain["prediction"]["made_by"] == f"model {VERSION} · fast path (static MiniLM)"

    listed = runner.invoke(app, ["list", "--json", "--db", str(stored)])
    rows = {r["number"]: r for r in json.loads(listed.stdout)}
    assert rows[1]["made_by"] == p["made_by"] and rows[1]["note"] == p["note"]
    assert rows[2]["made_by"] == plain["prediction"]["made_by"] and rows[2]["note"] is None
    table = runner.invoke(app, ["list", "--format", "table", "--db", str(stored)], env={"COLUMNS": "200"})
    assert "oom_four_step?" in table.stdout and "a resource fix beside the class none" in table.stdout


# ---- every path, one answer (the real model) ------------------------------------------------------------------------
FIVE = [("sgl-project/sglang", 5034),   # a rule's NCCL fix beside the class none
        ("vllm-project/vllm", 5569),    # the fix head's OOM steps beside none (left out)
        ("vllm-project/vllm", 19741),   # mixed GPUs (compute capability 8.6 / 8.9 / 12.0), a rule's class RE.3
        ("vllm-project/vllm", 4383),    # RE.3
        ("vllm-project/vllm", 188)]     # RE.1, CUDA out of memory
BF16 = ("ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your NVIDIA GeForce "
        "RTX 2060 GPU has compute capability 7.5. You can use float16 instead by explicitly setting the`dtype` flag "
        "in CLI, for example: --dtype=half.")
MIXED = {"repo": "vllm-project/vllm", "number": 990001, "title": "[Bug]: gemma 2 won't load", "state": "open",
         "created_at": "2025-07-01T00:00:00Z", "html_url": "https://github.com/vllm-project/vllm/issues/990001",
         "body": "```\nGPU models and configuration:\nGPU 0: NVIDIA GeForce RTX 2060\nGPU 1: NVIDIA GeForce RTX 4070 Ti\n"
                 f"\nvLLM Version: 0.5.4\n```\n\n```\n{BF16}\n```"}  # the model alone says none here


def records(closed: int = 2) -> list[dict]:
    """The five issues of the snapshot, the mixed-GPU one, and the first `closed` vLLM issues of the snapshot (by
    number) where the cascade's fast gate is closed, so that its full tier answers too."""
    from retriage.classifier.cascade import Reader
    from retriage.core.bundled import snapshot_files

    want, out, vllm = set(FIVE), [], []
    for f in snapshot_files():
        with gzip.open(f, "rt", encoding="utf-8") as fh:
            for r in map(json.loads, fh):
                if (r["repo"], r["number"]) in want:
                    out.append(r)
                elif r["repo"] == "vllm-project/vllm" and "/pull/" not in (r.get("html_url") or ""):
                    vllm.append(r)
    assert len(out) == len(FIVE)
    vllm = sorted(vllm, key=lambda r: r["number"])[:200]
    gate = Reader().read([(r["repo"], r["number"], r["title"], r["body"]) for r in vllm]).gate
    shut = [r for r, g in zip(vllm, gate) if not g][:closed]
    assert len(shut) == closed, "too few closed-gate issues among the first 200"
    return sorted(out, key=lambda r: FIVE.index((r["repo"], r["number"]))) + [MIXED] + shut


def answer(x: dict) -> tuple:
    return x["re_class"], x["abstained"], x["known_fixes"]


@pytest.mark.slow
def test_label_predict_show_list_comment_and_the_cascade_give_one_answer(tmp_path):
    from retriage.classifier.cascade import label_cascade
    from retriage.classifier.label import pending
    from retriage.classifier.model import IssueClassifier

    recs = records()
    src = tmp_path / "issues.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    db = tmp_path / "one.duckdb"
    assert run_cli("import", str(src), db=db).returncode == 0
    proc = run_cli("label", "--exact", "--json", db=db)
    assert proc.returncode == 0, proc.stderr
    cascade_db = tmp_path / "cascade.duckdb"  # the same issues and embedding cache, no prediction yet
    shutil.copy(db, cascade_db)
    con = duckdb.connect(str(cascade_db))
    con.execute("DELETE FROM predictions")
    con.close()
    keys = [(r["repo"], r["number"]) for r in recs]

    predicted = run_cli("predict", "-i", str(src), "-o", "-")
    assert predicted.returncode == 0, predicted.stderr
    by_predict = {(x["repo"], x["number"]): x for x in map(json.loads, predicted.stdout.splitlines())}
    by_list = {(x["repo"], x["number"]): x for x in json.loads(run_cli("list", "--json", db=db).stdout)}
    table = []
    for key in keys:
        ref = f"{key[0]}#{key[1]}"
        shown = run_cli("show", ref, "--json", "--offline", "--similar", "0", db=db)
        said = run_cli("comment", ref, "--offline", "--json", db=db)
        assert shown.returncode == 0 and said.returncode == 0, shown.stderr + said.stderr
        info, bot = json.loads(shown.stdout), json.loads(said.stdout)
        p = info["prediction"]
        answers = {"show": answer(p), "list": answer(by_list[key]), "predict": answer(by_predict[key]),
                   "comment": answer(bot)}
        assert len({json.dumps(a) for a in answers.values()}) == 1, (ref, answers)
        assert p["made_by"] == by_list[key]["made_by"] == bot["made_by"]
        assert p["made_by"].startswith(f"model {IssueClassifier.load().version} · MiniLM")
        assert p["note"] == by_list[key]["note"] == bot["note"]
        # show's advice is the bot's: the same matching rules, in the same order
        assert [a["tag"] for a in info["advice"] if a["source"] == "rule"] == bot["fixes"]
        table.append((ref, *answers["show"], p["made_by"], p["note"]))
        implied = [f for f in p["known_fixes"] if f in fix_tag_classes()]
        if p["re_class"] == "none" and implied:  # never beside none without a reason
            assert p["note"] and all(f in p["note"] for f in implied), (ref, p)
    print("\n" + "\n".join(" | ".join(map(str, row)) for row in table))
    got = {ref: (cls, abst, fixes, made_by, note) for ref, cls, abst, fixes, made_by, note in table}
    cls, abst, fixes, made_by, _ = got["vllm-project/vllm#990001"]
    assert (cls, abst) == ("RE.3", False) and "cuda_arch_mismatch" in fixes and "+ rule mixed-GPU class" in made_by
    assert "nccl_debug" in got["sgl-project/sglang#5034"][2]  # a rule's fix: never dropped
    if got["vllm-project/vllm#5569"][0] == "none":
        assert "oom_four_step" not in got["vllm-project/vllm#5569"][2]

    # the cascade (both tiers, in this process): where the full model answers, the same rows as `label`
    con = store.connect(cascade_db)
    model = IssueClassifier.load()
    label_cascade(con, model, pending(con, model.version), workers=1)
    cascade = {(r[0], r[1]): r[2:] for r in con.execute(
        "SELECT repo, number, re_class, abstained, known_fixes, made_by, note FROM predictions "
        "LEFT JOIN prediction_provenance USING (repo, number, model_version, labeled_at)").fetchall()}
    con.close()
    print("\n".join(f"cascade {k[0]}#{k[1]} | {r}" for k, r in cascade.items()))
    full = [k for k, r in cascade.items() if FAST not in r[3]]
    assert len(full) >= 2, "the cascade's full tier answered no issue"
    for k in full:
        assert cascade[k] == (*answer(by_list[k]), by_list[k]["made_by"], by_list[k]["note"]), k
    for k, (cls, abst, fixes, made_by, note) in cascade.items():
        if cls == "none" and any(f in fix_tag_classes() for f in fixes):
            assert note, (k, fixes)
    assert cascade[("vllm-project/vllm", 990001)][:2] == ("RE.3", False)
