"""notebooks/weekly_distribution.ipynb runs top to bottom (nbclient, the venv's python3 kernel) against a database
built from the bundled snapshot: once with predictions and embeddings written by SQL, once as a fresh import with
neither (what CI has before a model is trained). Any cell error fails the test."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from conftest import ROOT, SNAPSHOT
from retriage import taxonomy
from retriage.classifier import current_model_name
from retriage.db.importer import import_files
from retriage.db.store import connect

import pytest  # noqa: E402

pytestmark = pytest.mark.slow  # fresh interpreters, the real model or a training run: the full tier only

NOTEBOOK = ROOT / "notebooks" / "weekly_distribution.ipynb"
MODEL = "notebook-test-model"


def build_db(path: Path, labeled: bool) -> None:
    con = connect(path)
    import_files(con, sorted(SNAPSHOT.glob("*.jsonl.gz")))
    if labeled:
        con.execute("""
            INSERT INTO predictions SELECT repo, number, $classes[1 + (hash(repo, number) % len($classes))::BIGINT],
                   $components[1 + (hash(number, repo) % len($components))::BIGINT], 0.9, 0.8, number % 11 = 0,
                   [], $model, TIMESTAMP '2025-08-01'
            FROM issues WHERE number % 7 <> 0""",
            {"classes": taxonomy.re_class_ids(), "components": taxonomy.component_ids(), "model": MODEL})
        con.execute("""
            INSERT INTO embeddings SELECT md5(repo || '#' || number), $m,
                   list_transform(range(384), lambda k: ((hash(repo, number, k) % 1000) / 1000.0 - 0.5)::FLOAT)::FLOAT[384]
            FROM issues""", {"m": current_model_name()})
        con.execute("INSERT INTO issue_embeddings SELECT repo, number, $m, md5(repo || '#' || number) FROM issues",
                    {"m": current_model_name()})
    con.close()


def run_notebook(tmp_path: Path, monkeypatch, env: dict) -> list[str]:
    """Execute the notebook; return each code cell's outputs joined as text (streams and display data)."""
    for key in ("RETRIAGE_DB", "RETRIAGE_MODEL_VERSION", "RETRIAGE_EXAMPLE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=False,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    texts = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        parts = []
        for out in cell.outputs:
            if out.output_type == "stream" and out.name == "stdout":
                parts.append(out.text)
            elif "data" in out:
                parts.extend(str(v) for v in out["data"].values())
        texts.append("\n".join(parts))
    return texts


def test_notebook_with_labels_and_embeddings(tmp_path, monkeypatch):
    db = tmp_path / "nb.duckdb"
    build_db(db, labeled=True)
    out = run_notebook(tmp_path, monkeypatch, {"RETRIAGE_DB": str(db), "RETRIAGE_MODEL_VERSION": MODEL})
    setup, weekly, table, components, similar = out
    con = connect(db, read_only=True)
    issues, labeled = con.execute("""SELECT count(*), count(p.number) FROM issues i LEFT JOIN predictions p
                                     ON p.repo = i.repo AND p.number = i.number AND p.model_version = ?""",
                                  [MODEL]).fetchone()
    assert f"{issues:,} issues in 3 repositories, {labeled:,} labeled by model {MODEL}" in setup
    assert "vega" in weekly and "2025-07-14" in weekly  # the chart, with the snapshot's last week
    assert "Newest issues" in table and re.search(r"Δ \d\d-\d\d", table)  # the change row of the last full week
    assert "vega" in components
    for engine in ("vLLM", "SGLang", "llama.cpp"):
        assert re.search(rf"{re.escape(engine)}: [\d,]+ labeled issues; largest components", components)

    m = re.match(r"(\S+#\d+): ", similar)
    assert m, similar
    from retriage.lookup import lookup

    expected = lookup(con, m.group(1), similar=8)["similar"]  # the notebook shows what the library answers
    shown = re.findall(r"^\s+(\d\.\d\d)\s+(\S+#\d+)\s", similar, re.M)
    assert [ref for _, ref in shown] == [f"{format_ref(s['repo'], s['number'])}" for s in expected], similar
    if expected:
        assert "most similar" in similar  # the similarity chart
    else:
        assert "below the floor" in similar
    con.close()


def test_notebook_on_a_fresh_import_without_labels(tmp_path, monkeypatch):
    db = tmp_path / "fresh.duckdb"
    build_db(db, labeled=False)
    out = run_notebook(tmp_path, monkeypatch, {"RETRIAGE_DB": str(db)})  # the shipped model, if any
    setup, weekly, table, components, similar = out
    assert "0 labeled" in setup
    table = " ".join(table.split())  # Rich wraps at the notebook's width
    assert "retriage label" in weekly and "retriage label" in table
    assert "no labeled issues yet" in components
    assert "No similar issues yet" in similar


def test_notebook_is_stored_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "clear outputs before committing"
