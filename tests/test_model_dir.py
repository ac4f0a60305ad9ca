"""Your model, your labels: --model / RETRIAGE_MODEL, a one-line error for a missing or damaged model folder,
`train` writing to the user data folder, and `retriage relabel` corrections shown by show/list and learnt by
train. Real DuckDB files, the real shipped model (copied), the real CLI."""

from __future__ import annotations

import json
from datetime import datetime
import shutil

import pytest
from typer.testing import CliRunner

from conftest import corpus_file
from retriage.classifier import current_model_version, model_dir, shipped_model_dir
from retriage.classifier.model import IssueClassifier
from retriage.cli import app
from retriage.core.errors import UserError
from retriage.corrections import relabel
from retriage.db import queries, writes
from retriage.db.importer import import_files
from retriage.db.store import Database, transaction

runner = CliRunner()
REF = "llama.cpp#3825"
OTHER = "m-othermodel01"
NOW = datetime(2026, 1, 1)


def _copy_model(folder, version=OTHER):
    shutil.copytree(shipped_model_dir(), folder)
    meta = json.loads((folder / "meta.json").read_text())
    meta["model_version"] = version
    (folder / "meta.json").write_text(json.dumps(meta))
    return folder


@pytest.fixture
def db(tmp_path):
    """llama.cpp's first issues of the corpus (3825 among them), with a prediction from the shipped model and
    another from a second model."""
    import gzip

    with gzip.open(corpus_file("llama_cpp.jsonl.gz"), "rt", encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    keep = [r for r in records if r["number"] in (3825, 3826, 3830, 3840, 3850)] or records[:5]
    src = tmp_path / "issues.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in keep))
    d = Database(tmp_path / "t.duckdb")
    import_files(d, [src])
    with transaction(d) as con:
        rows = con.execute("SELECT repo, number FROM issues").fetchall()
        for version, cls in ((current_model_version(), "RE.1"), (OTHER, "RE.4")):
            writes.save_predictions(con, [(repo, n, cls, "operators", 0.9, 0.8, False, ["oom_four_step"], version, NOW,
                                           ) for repo, n in rows])
    return d


def test_model_dir_missing_or_damaged_is_one_line(tmp_path, monkeypatch):
    with pytest.raises(UserError, match="does not exist"):
        model_dir(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="not a retriage model folder"):
        model_dir(tmp_path / "empty")
    bad = _copy_model(tmp_path / "bad")
    (bad / "meta.json").write_text("{not json")
    with pytest.raises(UserError, match="damaged model"):
        model_dir(bad)
    bad2 = _copy_model(tmp_path / "bad2")
    (bad2 / "weights.npz").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(UserError, match="damaged model"):
        IssueClassifier.load(bad2)
    monkeypatch.setenv("RETRIAGE_MODEL", str(tmp_path / "gone"))
    with pytest.raises(UserError, match="RETRIAGE_MODEL"):
        IssueClassifier.load()


def test_env_and_option_choose_the_model(tmp_path, monkeypatch, db):
    other = _copy_model(tmp_path / "other")
    assert current_model_version() != OTHER
    monkeypatch.setenv("RETRIAGE_MODEL", str(other))
    assert current_model_version() == OTHER and IssueClassifier.load().version == OTHER
    r = runner.invoke(app, ["show", REF, "--json", "--db", db.path])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["prediction"]["re_class"] == "RE.4"  # the second model's prediction
    monkeypatch.delenv("RETRIAGE_MODEL")
    r = runner.invoke(app, ["show", REF, "--json", "--db", db.path])
    assert json.loads(r.output)["prediction"]["re_class"] == "RE.1"
    r = runner.invoke(app, ["list", "--json", "--model", str(other), "--db", db.path])
    assert r.exit_code == 0, r.output
    assert {x["re_class"] for x in json.loads(r.output)} == {"RE.4"}
    r = runner.invoke(app, ["stats", "--json", "--model", str(tmp_path / "missing"), "--db", db.path])
    assert isinstance(r.exception, UserError) and "does not exist" in str(r.exception)


def test_relabel_records_who_when_why_and_overrides_show_and_list(db, monkeypatch):
    monkeypatch.setenv("USER", "alice")
    r = runner.invoke(app, ["relabel", REF, "--class", "RE.2", "--component", "scheduler", "--reason",
                            "the shift overwrites the cell delta", "--db", db.path, "--json"])
    assert r.exit_code == 0, r.output
    row = json.loads(r.output)
    assert (row["re_class"], row["component"], row["known_fix"]) == ("RE.2", "scheduler", "oom_four_step")
    assert row["corrected_by"] == "alice" and row["was"].startswith("RE.1 / operators / oom_four_step")
    shown = json.loads(runner.invoke(app, ["show", REF, "--json", "--db", db.path]).output)
    assert shown["correction"]["re_class"] == "RE.2" and shown["correction"]["reason"].startswith("the shift")
    panel = runner.invoke(app, ["show", REF, "--db", db.path]).output
    assert "RE.2 (corrected)" in panel and "by alice" in panel and "model said" in panel
    listed = json.loads(runner.invoke(app, ["list", "--json", "--limit", "50", "--db", db.path]).output)
    mine = [x for x in listed if x["number"] == 3825][0]
    assert mine["corrected"] and mine["re_class"] == "RE.2" and mine["component"] == "scheduler"
    assert all(not x["corrected"] and x["re_class"] == "RE.1" for x in listed if x["number"] != 3825)
    only = json.loads(runner.invoke(app, ["list", "--json", "--class", "RE.2", "--db", db.path]).output)
    assert [x["number"] for x in only] == [3825]
    # a second correction wins; the first stays as history
    relabel(db, REF, fix="none", reason="no known fix applies", by="bob")
    with db.reading() as con:
        c = queries.correction(con, "ggml-org/llama.cpp", 3825)
        assert (c["known_fix"], c["corrected_by"], c["corrections"]) == ("none", "bob", 2)
        assert c["re_class"] == "RE.2", "what was not given is kept from the correction in force"


def test_relabel_refuses_bad_input(db):
    with pytest.raises(UserError, match="--reason"):
        relabel(db, REF, re_class="RE.2", reason=" ")
    with pytest.raises(UserError, match="--component must be one of"):
        relabel(db, REF, component="gpu", reason="x")
    with pytest.raises(UserError, match="at least one"):
        relabel(db, REF, reason="x")
    with pytest.raises(UserError, match="not in the database"):
        relabel(db, "vllm#999999", re_class="RE.1", reason="x")
    r = runner.invoke(app, ["relabel", REF, "--class", "RE.9", "--reason", "x", "--db", db.path])
    assert isinstance(r.exception, UserError) and r.exception.exit_code == 2 and "'RE.9'" in str(r.exception)
    with db.reading() as con:
        assert queries.correction(con, "ggml-org/llama.cpp", 3825) is None, "nothing was recorded"


def test_corrections_become_training_labels(db, tmp_path):
    from retriage.classifier.dataset import training_examples

    base, _ = training_examples(None, corrections=False)
    labeled = {e.key: e for e in base}
    assert ("ggml-org/llama.cpp", 3825) in labeled
    relabel(db, REF, re_class="RE.3", component="frontend", fix="nccl_debug", reason="test", by="carol")
    from retriage.classifier.dataset import snapshot_index

    new = next(k for k in snapshot_index() if k not in labeled)  # a snapshot issue nobody labeled
    extra = tmp_path / "extra.jsonl"
    extra.write_text(json.dumps({"repo": new[0], "number": new[1], "re_class": "RE.4",
                                 "component": "other", "known_fix": "none"}) + "\n")
    examples, n = training_examples(db, extra_labels=[extra])
    got = {e.key: e for e in examples}
    assert n == 1
    e = got[("ggml-org/llama.cpp", 3825)]
    assert (e.re_class, e.component, e.known_fix) == ("RE.3", "frontend", "nccl_debug")
    assert e.title == labeled[e.key].title, "the text stays the labeled set's"
    assert got[new].re_class == "RE.4" and got[new].title == snapshot_index()[new]["title"]
    assert len(examples) == len(base) + 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"repo": "x/y"}\n')
    with pytest.raises(UserError, match="lacks number"):
        training_examples(None, extra_labels=[bad], corrections=False)


@pytest.mark.slow
def test_train_writes_to_the_user_data_folder_never_the_package(tmp_path, monkeypatch):
    from test_classifier import CountingEmbedder, small_labels_folder

    from retriage.classifier.train import train

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    small_labels_folder(tmp_path / "labels")
    shipped = {p.name: p.read_bytes() for p in shipped_model_dir().iterdir() if p.is_file()}
    db = Database(tmp_path / "cache.duckdb")
    result = train(db, tmp_path / "labels", embedder=CountingEmbedder(), unlabeled=[])
    folder = tmp_path / "data" / "retriage" / "models" / result.version
    assert result.model.folder == folder and (folder / "weights.npz").is_file() and (folder / "fast.npz").is_file()
    assert [p.name for p in folder.parent.iterdir()] == [result.version], "no staging folder left behind"
    assert IssueClassifier.load(folder).version == result.version
    assert {p.name: p.read_bytes() for p in shipped_model_dir().iterdir() if p.is_file()} == shipped
