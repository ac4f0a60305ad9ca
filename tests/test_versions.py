"""The engine version of each issue: parsing (taxonomy/versions.py), storage on every write and after a re-label
(db/versions.py), the fill of a database made before migration 005, `list --version` and the sentence of `show`
and the bot — on real corpus issues in a real DuckDB file."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from typer.testing import CliRunner

from conftest import corpus_slice
from retriage.cli import app
from retriage.core.errors import UserError
from retriage.db import versions as dv
from retriage.db import writes
from retriage.db.importer import import_files
from retriage.db.store import connect, transaction
from retriage.taxonomy import versions as tv

pytestmark = pytest.mark.slow  # a local GitHub server or a labeled database per file: the full tier only

MODEL = "m-versions0001"


def reported(engine: str, text: str) -> str:
    return next(v.version for v in tv.parse(engine, text) if v.role == "reported")


# (engine, text, the version a reader finds): the first forms, then the forms behind the held-out misses, then
# those behind the fresh misses (each with a look-alike that must not read)
FIRST = [
    ("vllm", "Versions of relevant libraries:\nvLLM Version: 0.6.4.post1\nvLLM Build Flags:", "0.6.4.post1"),
    ("vllm", "vLLM Version: 0.6.6.post2.dev103+ge512f76a.d20250129", "0.6.6.post2.dev103"),
    ("vllm", "- python3.10\n- vllm==0.7.3\n- torch==2.5.1", "0.7.3"),
    ("vllm", "docker run vllm/vllm-openai:v0.9.1 --model x", "0.9.1"),
    ("vllm", "torch==2.5.1\ntransformers==4.49.0", "unknown"),  # other packages' versions are not vLLM's
    ("sglang", "sglang: 0.4.6.post1\nvllm: 0.5.4", "0.4.6.post1"),
    ("sglang", "vllm: 0.5.4\nflashinfer: 0.1.6", "unknown"),  # a vLLM version in an SGLang issue
    ("sglang", "image: lmsysorg/sglang:v0.4.8.post1-rocm630-srt", "0.4.8.post1"),
    ("llama.cpp", "### Name and Version\n$ ./llama-cli --version\nversion: 4075 (fb4a0ec0)", "b4075"),
    ("llama.cpp", "main: build = 2752 (6e472f58)", "b2752"),
    ("llama.cpp", "FROM ghcr.io/ggml-org/llama.cpp:server-cuda-b5583", "b5583"),
    ("llama.cpp", "version: 0 (unknown)", "unknown"),
    ("trtllm", "[TensorRT-LLM] TensorRT-LLM version: 0.21.0", "0.21.0"),
    ("trtllm", "tensorrt                 10.7.0\ntensorrt_llm             1.1.0rc2", "1.1.0rc2"),
    ("trtllm", "docker run nvcr.io/nvidia/tensorrt-llm/release:1.0.0rc4 bash", "1.0.0rc4"),
    ("sglang", "Hi, I am using the main branch of SGLang.", "main"),
]
HELD_OUT_MISSES = [
    ("vllm", "I am using docker image with **VLLM v 0.9.0.1**", "0.9.0.1"),  # a four-part release, "v 0.x"
    ("vllm", "vLLM Version : 0.9.0.1\nvLLM Build Flags:", "0.9.0.1"),
    ("sglang", "### Environment\n\nVersion: 0.4.4.post1", "0.4.4.post1"),  # a bare template answer
    ("sglang", "Name: torch\nVersion: 2.5.1\nSummary: Tensors", "unknown"),  # pip show of another package
    ("sglang", "Name: sglang\nVersion: 0.4.6\nSummary: SGLang", "0.4.6"),
    ("sglang", "The accuracy drops in the main branch, seen by the nightly CI.", "main"),
    ("trtllm", "TensorRT-LLM: release/0.5.0\nTensorRT: 9.1.0", "0.5.0"),
    ("trtllm", "Used Tensorrt llm version: 0.10.0 - included in the image above", "0.10.0"),
    ("trtllm", "[TensorRT-LLM][INFO] Engine version 1.2.0rc2 found in the config file, assuming engine(s)", "1.2.0rc2"),
    ("llama.cpp", "Quantizing the K cache is currently broken on master for batch size 1.", "main"),
    ("llama.cpp", "### Name and Version\n\non latest commit ce8784bdb153ff7794dde5a50b0ebfa51baa6171", "main"),
    ("llama.cpp", "main: build = 1 (2a4bcba)\nmain: seed  = 1697243692", "main"),  # a shallow clone counts 1
    ("llama.cpp", "rank 0 runs on the master node, rank 1 on the worker", "unknown"),
    ("vllm", "we build Triton from the commit `e192dba224c673671ae70f73842fc693ca279a45`", "unknown"),
    ("sglang", "sglang 0.30 can run the small model.", "unknown"),  # prose, not a `pip list` row
    ("sglang", "sglang                    0.4.6.post1              pypi_0    pypi", "0.4.6.post1"),
]
FRESH_MISSES = [
    ("vllm", "工具： Vllm=0.8.4", "0.8.4"),  # a pin written with one "="
    ("vllm", "flashinfer=0.2.5\nvllm-flash-attn==2.5.9\nvllm>=0.6", "unknown"),  # other packages, a range
    ("vllm", "the latest release of vllm ([v0.5.0.post1](https://github.com/vllm-project/vllm/releases/tag/v0.5.0.post1))",
     "0.5.0.post1"),
    ("vllm", "the fix is in transformers ([v4.45.0](https://github.com/huggingface/transformers/releases/tag/v4.45.0))",
     "unknown"),
    ("vllm", "Note: this is a problem with vllm (0.6.2) not supporting PEP 517 builds", "0.6.2"),
    ("sglang", "### Environment\n\nsglang-0.4.6\n", "0.4.6"),
    ("sglang", "sglang-router-0.1.4\n", "unknown"),  # another package of the family
    ("trtllm", "cd /llm/tmp/trtllm/v0.17/TensorRT-LLM/examples/gemma/", "0.17"),
    ("trtllm", "cd /opt/v1.2/flashinfer/benchmarks", "unknown"),  # a path of another project
    ("trtllm", "Docker image: `tensorrt_llm-release:v0.20.0rc0`", "0.20.0rc0"),
    ("vllm", "`test_seeded_generate.py` has been failing on main since #17731", "main"),
    ("vllm", "the error is raised in main thread of the engine", "unknown"),
    ("llama.cpp", "(base) ➜  llama.cpp git:(master) ✗ ./main -m model.bin", "main"),
    ("vllm", "(venv) ➜  transformers git:(main) python bench.py", "unknown"),  # another project's checkout
    ("llama.cpp", "    image: ghcr.io/ggerganov/llama.cpp:server\n    pull_policy: always", "main"),
    ("vllm", "docker run vllm/vllm-openai:nightly --model x", "main"),
    ("sglang", "docker pull lmsysorg/sglang:latest", "unknown"),  # the newest release, number not known
    ("vllm", "FROM nvidia/cuda:nightly", "unknown"),  # another image's rolling tag
    ("llama.cpp", "### Git commit\n\ngit rev-parse HEAD b56f079e28fda692f11a8b59200ceb815b05d419", "main"),
    ("llama.cpp", "After upgrading to latest code compiling and then running", "main"),
    ("llama.cpp", "- [x] I am running the latest code. Development is very rapid", "unknown"),  # a ticked checkbox alone
    ("sglang", "run latest sglang code(1eb8eade2bf6f69bf38c7d2706242775842131c5) on 2 nodes", "main"),
    ("trtllm", "pip3 install tensorrt_llm -U --pre --extra-index-url https://pypi.nvidia.com", "unknown"),
]


@pytest.mark.parametrize("engine, text, version", FIRST + HELD_OUT_MISSES + FRESH_MISSES)
def test_parse_reads_the_engines_own_version(engine, text, version):
    assert reported(engine, text) == version


def test_an_upgrade_of_another_package_or_one_that_fixed_it_is_no_regression():
    assert {v.role for v in tv.parse("sglang", "By upgrading the nccl using pip from 2.21 to 2.26, this error is gone")
            } == {"reported"}
    assert {v.role for v in tv.parse("vllm", "Upgrading vllm from 0.6.3 to 0.6.4 fixed it")} == {"reported"}
    rows = {v.role: v.version for v in tv.parse("vllm", "After upgrading vLLM from 0.6.3 to 0.6.4 the server hangs")}
    assert (rows["good"], rows["bad"]) == ("0.6.3", "0.6.4")


def test_four_part_releases_sort_between_their_neighbours():
    n = tv.normalise("vllm", "0.9.0.1")
    assert n[:2] == ("0.9.0.1", "0.9")
    assert tv.normalise("vllm", "0.9.0")[2] < n[2] < tv.normalise("vllm", "0.9.1.dev1")[2] < tv.normalise(
        "vllm", "0.9.1")[2]


def test_a_regression_report_keeps_both_versions():
    rows = {v.role: v for v in tv.parse("vllm", "It worked fine in 0.8.4 but it fails with vllm 0.8.5.")}
    assert (rows["good"].version, rows["bad"].version, rows["reported"].version) == ("0.8.4", "0.8.5", "0.8.5")
    rows = {v.role: v for v in tv.parse("vllm", "this only happens in `v0.6.4.post1` and works fine in `v0.6.3.post1`")}
    assert (rows["good"].version, rows["bad"].version) == ("0.6.3.post1", "0.6.4.post1")
    assert "good" not in {v.role for v in tv.parse("vllm", "vLLM Version: 0.8.5")}


def test_releases_and_their_order():
    assert tv.normalise("vllm", "v0.10.1")[:2] == ("0.10.1", "0.10")
    assert tv.normalise("llama.cpp", "b4999")[:2] == ("b4999", "b4500-b4999")
    keys = [tv.release_key("vllm", r) for r in ("0.9", "0.10", "main", "unknown")]
    assert keys == sorted(keys) and len(set(keys)) == 4
    assert tv.normalise("vllm", "0.6.4.dev12")[2] < tv.normalise("vllm", "0.6.4")[2] < tv.normalise(
        "vllm", "0.6.4.post1")[2] < tv.normalise("vllm", "0.6.5")[2]
    assert tv.release_key("llama.cpp", "b4500-b4999") < tv.release_key("llama.cpp", "b5000-b5499")


@pytest.mark.parametrize("bad", ["", "foo", "0.8..b7700", "b7700..b7600", "1.2.3.4.5"])
def test_bad_filters_are_refused(bad):
    with pytest.raises(ValueError):
        tv.parse_filter(bad)


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    folder = tmp_path_factory.mktemp("versions")
    path, records = corpus_slice(folder, lambda i: i % 4 == 0)  # every period
    dbfile = folder / "v.duckdb"
    con = connect(dbfile)
    import_files(con, [path])
    issues = con.execute("SELECT repo, number FROM issues WHERE NOT is_pull_request ORDER BY repo, number").fetchall()
    classes = ["RE.1", "RE.2", "RE.3", "RE.4", "none"]
    rows = [(repo, number, classes[i % 5], "other", 0.9, 0.8, False, [], MODEL, datetime(2026, 1, 1))
            for i, (repo, number) in enumerate(issues)]
    with transaction(con):
        writes.save_predictions(con, rows)
    con.close()
    return dbfile, {(r["repo"], r["number"]): r for r in records}


def test_import_stores_one_reported_row_per_issue_from_its_body(db):
    path, records = db
    con = connect(path, read_only=True)
    stored = con.execute("SELECT repo, number, version FROM issue_versions WHERE role = 'reported'").fetchall()
    issues = con.execute("SELECT count(*) FROM issues WHERE NOT is_pull_request").fetchone()[0]
    assert len(stored) == issues == len({(r, n) for r, n, _ in stored})
    for repo, number, version in stored:
        assert version == reported(tv.engine_id(dv.of_issue(con, repo, number)[0]["engine"]),
                                   records[(repo, number)]["body"])
    assert sum(v != "unknown" for _, _, v in stored) > 50


def test_relabel_keeps_versions_and_a_database_before_005_gets_them_on_label(db, tmp_path):
    import shutil

    path, _ = db
    copy = tmp_path / "old.duckdb"
    shutil.copy(path, copy)
    con = connect(copy)
    before = con.execute("SELECT * FROM issue_versions ORDER BY ALL").fetchall()
    with transaction(con):  # a re-label writes predictions only
        writes.save_predictions(con, [(r, n, "RE.2", "other", 0.5, 0.5, False, [], "m-other", datetime(2026, 2, 1))
                                      for r, n in con.execute("SELECT repo, number FROM issues").fetchall()])
    assert con.execute("SELECT * FROM issue_versions ORDER BY ALL").fetchall() == before
    con.execute("DELETE FROM issue_versions")  # as a database made before migration 005
    assert dv.fill_missing(con) == len({(r[0], r[1]) for r in before})
    assert con.execute("SELECT * FROM issue_versions ORDER BY ALL").fetchall() == before
    assert dv.fill_missing(con) == 0
    con.close()


@pytest.fixture
def model_version(monkeypatch):
    import retriage.classifier as clf

    monkeypatch.setattr(clf, "current_model_version", lambda folder=None: MODEL)


def _list(path, *args):
    r = CliRunner().invoke(app, ["list", "--db", str(path), "--json", "--limit", "100000", *args])
    assert r.exit_code == 0, r.output
    return {(x["repo"], x["number"]) for x in json.loads(r.stdout)}


def test_list_version_keeps_exactly_the_issues_on_it(db, model_version):
    path, _ = db
    con = connect(path, read_only=True)
    release = con.execute("""SELECT release FROM issue_versions WHERE engine = 'vllm' AND role = 'reported'
                             AND release NOT IN ('main', 'unknown') GROUP BY 1 ORDER BY count(*) DESC LIMIT 1"""
                          ).fetchone()[0]
    want = set(con.execute("SELECT repo, number FROM issue_versions WHERE role IN ('reported', 'bad') "
                           "AND (release = ? OR version = ?)", [release, release]).fetchall())
    assert want and _list(path, "--version", release) == want
    builds = con.execute("SELECT repo, number, sort_key FROM issue_versions WHERE engine = 'llama.cpp' "
                         "AND role = 'reported' AND version LIKE 'b%'").fetchall()
    assert len(builds) >= 8
    lo, hi = sorted(k for *_, k in builds)[len(builds) // 4], sorted(k for *_, k in builds)[3 * len(builds) // 4]
    assert _list(path, "--version", f"b{int(lo)}..b{int(hi)}") == {(r, n) for r, n, k in builds if lo <= k <= hi}
    assert _list(path, "--version", "unknown", "--engine", "sglang") == set(con.execute(
        "SELECT repo, number FROM issue_versions WHERE engine = 'sglang' AND version = 'unknown'").fetchall())


@pytest.mark.parametrize("bad", ["foo", "b7700..b7600", "0.8..b5000"])
def test_list_bad_version_is_a_one_line_usage_error(db, model_version, bad):
    path, _ = db
    r = CliRunner().invoke(app, ["list", "--db", str(path), "--version", bad])
    assert isinstance(r.exception, UserError) and r.exception.exit_code == 2
    assert "--version" in str(r.exception) and "\n" not in str(r.exception)


def test_reported_on_counts_other_issues_of_the_class_on_the_release(db):
    path, _ = db
    con = connect(path, read_only=True)
    repo, number, release = con.execute("""SELECT repo, number, release FROM issue_versions
        WHERE engine = 'vllm' AND role = 'reported' AND release NOT IN ('main', 'unknown') ORDER BY number LIMIT 1"""
                                        ).fetchone()
    cls = con.execute("SELECT re_class FROM predictions WHERE repo = ? AND number = ?", [repo, number]).fetchone()[0]
    others = con.execute("""SELECT count(*) FROM issue_versions v JOIN predictions p USING (repo, number)
        WHERE v.role = 'reported' AND v.engine = 'vllm' AND v.release = ? AND p.re_class = ? AND v.number <> ?""",
                         [release, cls, number]).fetchone()[0]
    version = dv.of_issue(con, repo, number)[0]["version"]
    text = dv.reported_on(con, repo, number, cls, MODEL)
    assert text.startswith(f"reported on vLLM {version}") or text.startswith("regression: worked on vLLM")
    assert text.endswith(f"— {others} other {cls} reports on {release}" if cls != "none"
                         else f"— {others} other reports of no resource class on {release}")
