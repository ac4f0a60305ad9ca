"""`retriage show` and `retriage stats` on a database built from the real corpus."""

from __future__ import annotations

import json

import pytest

from retriage.core.errors import UserError
from retriage.core.refs import parse_ref
from conftest import corpus_file, run_cli

pytestmark = pytest.mark.slow  # fresh interpreters, the real model or a training run: the full tier only


@pytest.fixture(scope="module")
def corpus_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("show") / "c.duckdb"
    files = [str(corpus_file(n)) for n in ("vllm.jsonl.gz", "sglang.jsonl.gz", "llama_cpp.jsonl.gz")]
    proc = run_cli("import", *files, db=db)
    assert proc.returncode == 0, proc.stderr
    return db


@pytest.mark.parametrize("ref, expected", [
    ("vllm#7472", ("vllm-project/vllm", 7472)),
    ("sglang#123", ("sgl-project/sglang", 123)),
    ("llama.cpp#3825", ("ggml-org/llama.cpp", 3825)),
    ("trtllm#1458", ("NVIDIA/TensorRT-LLM", 1458)),
    ("ggerganov/llama.cpp#5", ("ggml-org/llama.cpp", 5)),
    ("owner/name#9", ("owner/name", 9)),
    ("https://github.com/vllm-project/vllm/issues/7472", ("vllm-project/vllm", 7472)),
    ("https://github.com/sgl-project/sglang/pull/12#issuecomment-1", ("sgl-project/sglang", 12)),
])
def test_parse_ref(ref, expected):
    assert parse_ref(ref) == expected


@pytest.mark.parametrize("bad", ["vllm", "foo#12", "#12", "vllm#", ""])
def test_parse_ref_rejects(bad):
    with pytest.raises(UserError):
        parse_ref(bad)


def test_show_prints_issue_and_json_parses(corpus_db):
    proc = run_cli("show", "llama.cpp#3825", db=corpus_db)
    assert proc.returncode == 0, proc.stderr
    assert "llama.cpp#3825" in proc.stdout
    assert "https://github.com/ggml-org/llama.cpp/issues/3825" in proc.stdout
    js = run_cli("show", "https://github.com/ggml-org/llama.cpp/issues/3825", "--json", db=corpus_db)
    data = json.loads(js.stdout)
    assert data["issue"]["number"] == 3825 and data["issue"]["repo"] == "ggml-org/llama.cpp"
    assert data["issue"]["html_url"].endswith("/issues/3825")


def test_show_unknown_issue_is_one_line_exit_1(corpus_db):
    proc = run_cli("show", "vllm#99999999", db=corpus_db)
    assert proc.returncode == 1
    assert len(proc.stderr.strip().splitlines()) == 1 and "not in the database" in proc.stderr


def test_stats_counts_match_sql(corpus_db):
    import duckdb

    proc = run_cli("stats", "--json", db=corpus_db)
    data = json.loads(proc.stdout)
    con = duckdb.connect(str(corpus_db), read_only=True)
    per_repo = dict(con.execute("SELECT repo, count(*) FROM issues GROUP BY repo").fetchall())
    assert {r["repo"]: r["issues"] for r in data["repos"]} == per_repo
    assert data["issues"] == sum(per_repo.values())


def test_show_says_the_version_reported_on(corpus_db):
    data = json.loads(run_cli("show", "vllm#10831", "--json", "--offline", db=corpus_db).stdout)
    assert data["reported_on"] == "regression: worked on vLLM 0.6.3.post1, broken on 0.6.4.post1"
    data = json.loads(run_cli("show", "vllm#17821", "--json", "--offline", db=corpus_db).stdout)
    assert data["reported_on"] == "reported on vLLM 0.8.5"  # not labeled: no class to count
    proc = run_cli("show", "vllm#17821", "--offline", db=corpus_db)
    assert "reported on vLLM 0.8.5" in proc.stdout
