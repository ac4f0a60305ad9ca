"""`retriage search`, similar issues and `--web`, over a small real-issue DuckDB file: corpus issues (every one
that mentions /dev/shm, and the first ones of each engine), labeled by the real model with the real MiniLM
vectors (the snapshot's embedding cache)."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import stat

import pytest
from typer.testing import CliRunner

from conftest import corpus_file, run_cli
from retriage.cli import app
from retriage.core.errors import UserError

pytestmark = pytest.mark.slow  # loads the real model


def _records() -> list[dict]:
    out = []
    for name in ("vllm.jsonl.gz", "sglang.jsonl.gz", "llama_cpp.jsonl.gz"):
        with gzip.open(corpus_file(name), "rt", encoding="utf-8") as f:
            for i, line in enumerate(f):
                r = json.loads(line)
                if i < 40 or "/dev/shm" in (r["body"] or "") or int(r["number"]) == 5096:
                    out.append(r)
    return out


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    env = pytest.MonkeyPatch()  # a cache folder of this module's own, given back when the module ends
    env.setenv("RETRIAGE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    from retriage.classifier.label import label_database
    from retriage.classifier.snapshot_cache import load_into
    from retriage.db import writes
    from retriage.db.importer import import_files
    from retriage.db.store import connect, transaction
    from retriage.db.lexical import ensure_all
    from retriage.demo import load_team_labels

    folder = tmp_path_factory.mktemp("search")
    records = _records()
    src = folder / "slice.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    path = folder / "search.duckdb"
    con = connect(path)
    import_files(con, [src])
    load_team_labels(con)  # gold_labels, as `retriage demo` loads them
    with transaction(con):
        load_into(con)
    label_database(con)
    ensure_all(con)  # the lexical indexes, as `retriage label` builds them
    with transaction(con):  # one issue with a linked fixing PR, for the similar-issues rows
        writes.save_links(con, [("sgl-project/sglang", 99999, "sgl-project/sglang", 5096)])
    con.close()
    yield path, records
    env.undo()


def mentions(records, text: str) -> set[tuple[str, int]]:
    return {(r["repo"], int(r["number"])) for r in records if text in ((r["title"] or "") + (r["body"] or ""))}


def invoke(*args):
    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return r.stdout


def test_issues_that_mention_dev_shm_come_first(db):
    path, records = db
    want = mentions(records, "/dev/shm")
    assert len(want) >= 5
    rows = json.loads(invoke("search", "/dev/shm", "--json", "--limit", "50", "--db", str(path)))
    got = [(r["repo"], r["number"]) for r in rows]
    assert got[0] in want
    assert set(got[:len(want)]) == want, "an issue that does not mention /dev/shm ranks above one that does"
    keys = [(not r["all_terms"], -r["score"]) for r in rows]
    assert keys == sorted(keys)  # every term first, then by score
    assert all(r["all_terms"] for r in rows[:len(want)]) and not any(r["all_terms"] for r in rows[len(want):])
    for key in ("repo", "number", "title", "state", "created_at", "re_class", "component", "known_fixes",
                "html_url", "score"):
        assert key in rows[0]
    assert rows[0]["html_url"].startswith("https://github.com/")


def test_filters_of_list_apply(db):
    path, _ = db
    rows = json.loads(invoke("search", "/dev/shm", "--json", "--engine", "sglang", "--state", "closed",
                             "--limit", "3", "--db", str(path)))
    assert 0 < len(rows) <= 3
    assert all(r["repo"] == "sgl-project/sglang" and r["state"] == "closed" for r in rows)
    every = json.loads(invoke("search", "memory", "--json", "--limit", "500", "--db", str(path)))
    for cls in {r["re_class"] for r in every}:
        part = json.loads(invoke("search", "memory", "--json", "--class", cls, "--limit", "500", "--db", str(path)))
        assert part and {r["re_class"] for r in part} == {cls}
        assert [r["number"] for r in part] == [r["number"] for r in every if r["re_class"] == cls]
    r = CliRunner().invoke(app, ["search", "memory", "--class", "RE.9", "--db", str(path)])
    assert isinstance(r.exception, UserError) and r.exception.exit_code == 2 and "--class must be one of" in str(
        r.exception)  # main() prints it as one line, exit code 2


def test_csv_and_ndjson(db):
    path, _ = db
    as_json = json.loads(invoke("search", "cuda out of memory", "--json", "--limit", "5", "--db", str(path)))
    lines = invoke("search", "cuda out of memory", "--format", "ndjson", "--limit", "5", "--db", str(path))
    nd = [json.loads(x) for x in lines.splitlines()]
    assert [(x["repo"], x["number"], x["score"]) for x in nd] == [(x["repo"], x["number"], x["score"]) for x in as_json]
    rows = list(csv.DictReader(io.StringIO(invoke("search", "cuda out of memory", "--format", "csv", "--limit", "5",
                                                  "--db", str(path)))))
    assert [int(x["number"]) for x in rows] == [x["number"] for x in as_json]
    assert float(rows[0]["score"]) == as_json[0]["score"]
    table = invoke("search", "cuda out of memory", "--limit", "5", "--format", "table", "--db", str(path))
    assert "score" in table and "issues" in table
    plain = invoke("search", "cuda out of memory", "--limit", "5", "--db", str(path)).splitlines()
    assert plain[0].split("\t")[:2] == ["issue", "score"]
    assert [x.split("\t")[-1] for x in plain[1:]] == [x["html_url"] for x in as_json]


def test_similar_issues_have_a_floor_and_say_what_fixed_them(db):
    path, records = db
    from retriage.classifier.embed import get_embedder
    from retriage.classifier.features import views
    from retriage.classifier import current_model_name
    from retriage.db.neighbours import NeighbourIndex
    from retriage.db.similar import FLOOR, similar_issues
    from retriage.db.store import connect

    con = connect(path, read_only=True)
    emb = get_embedder("numpy")
    model = current_model_name()
    for text in ("hello world", "thanks"):
        v = emb.encode([views("", text).full])[0]
        assert similar_issues(con, v, model) == []
    shm = next(r for r in records if int(r["number"]) == 5096)
    v = emb.encode([views(shm["title"], shm["body"]).full])[0]
    rows = similar_issues(con, v, model, limit=5)
    assert rows and all(r["score"] >= FLOOR and r["score"] == r["cosine"] for r in rows)
    held = similar_issues(con, v, model, limit=5, index=NeighbourIndex())  # the cosines in numpy: the same rows
    assert [(r["repo"], r["number"]) for r in held] == [(r["repo"], r["number"]) for r in rows]
    assert all(abs(a["score"] - b["score"]) <= 1.01e-4 for a, b in zip(held, rows))
    top = rows[0]
    assert (top["repo"], top["number"]) == ("sgl-project/sglang", 5096)  # itself, not excluded here
    assert top["fixed"] is True and top["fixed_by"] == [99999]
    assert top["known_fix"] == "ipc_host" and top["fix_source"] == "team"
    others = similar_issues(con, v, model, limit=5, exclude=("sgl-project/sglang", 5096))
    assert ("sgl-project/sglang", 5096) not in {(r["repo"], r["number"]) for r in others}
    assert all(r["fixed"] is False and r["fixed_by"] == [] for r in others)  # closed is not fixed


def test_classify_of_hello_world_lists_no_similar_issues(db):
    path, _ = db
    p = run_cli("classify", "-", "--json", db=path, input="hello world\n",
                env={"RETRIAGE_CACHE_DIR": os.environ["RETRIAGE_CACHE_DIR"]})
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["similar"] == []


def test_classify_finds_the_issue_a_trace_came_from(db):
    """sglang_nccl_shm_2.txt is an excerpt of sglang#5096's log; with and without the held index alike. With the
    log's MiniLM vector (`--exact`): the fast path's estimate of it also ranks sglang#5096 first, but at cosine
    0.597 on the demo database, under the floor."""
    from pathlib import Path

    from retriage.db.store import connect
    from retriage.triage.classify import Triage

    path, _ = db
    con = connect(path, read_only=True)
    data = (Path(__file__).resolve().parent / "data" / "traces" / "sglang_nccl_shm_2.txt").read_bytes()
    held, asked = Triage(fast=False).run(data, con=con), Triage(fast=False, index=False).run(data, con=con)
    assert held.similar and held.similar == asked.similar
    first = held.similar[0]
    assert (first["repo"], first["number"]) == ("sgl-project/sglang", 5096)
    assert first["known_fix"] == "ipc_host" and first["fixed_by"] == [99999]


@pytest.fixture
def browser(tmp_path):
    log = tmp_path / "opened.txt"
    script = tmp_path / "browser.sh"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$1" >> "{log}"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script, log


def test_web_opens_the_first_result(db, browser):
    path, _ = db
    script, log = browser
    env = {"BROWSER": str(script), "RETRIAGE_CACHE_DIR": os.environ["RETRIAGE_CACHE_DIR"]}
    first = json.loads(invoke("search", "/dev/shm", "--json", "--limit", "1", "--db", str(path)))[0]
    for args in (["search", "/dev/shm", "--web"], ["list", "--engine", "sglang", "--web"],
                 ["show", "sglang#5096", "--web"]):
        p = run_cli(*args, db=path, env=env)
        assert p.returncode == 0, p.stderr
        assert p.stdout == ""
    opened = log.read_text().splitlines()
    listed = json.loads(invoke("list", "--engine", "sglang", "--json", "--limit", "1", "--db", str(path)))[0]
    assert opened == [first["html_url"], listed["html_url"], "https://github.com/sgl-project/sglang/issues/5096"]
    p = run_cli("search", "zzzqqq-no-such-word-anywhere", "--web", "--engine", "trtllm", db=path, env=env)
    assert p.returncode == 1 and p.stderr.startswith("retriage: error: nothing to open")


def test_version_filter_of_list_applies(db):
    path, _ = db
    from retriage.db.store import connect

    con = connect(path, read_only=True)
    on = set(con.execute("SELECT repo, number FROM issue_versions WHERE release = '0.4' AND role = 'reported' "
                         "AND repo = 'sgl-project/sglang'").fetchall())
    con.close()
    every = json.loads(invoke("search", "memory", "--json", "--limit", "500", "--db", str(path)))
    part = json.loads(invoke("search", "memory", "--json", "--limit", "500", "--version", "0.4", "--engine", "sglang",
                             "--db", str(path)))
    assert [(r["repo"], r["number"]) for r in part] == [(r["repo"], r["number"]) for r in every
                                                        if (r["repo"], r["number"]) in on]
    r = CliRunner().invoke(app, ["search", "memory", "--version", "nope", "--db", str(path)])
    assert isinstance(r.exception, UserError) and r.exception.exit_code == 2
