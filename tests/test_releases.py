"""`retriage report --releases` on a real DuckDB file: issues, predictions, team labels, corrections and
issue_versions rows written with SQL (as the version parser will write them), each issue's class and release known
by construction. Intervals are checked against scipy's Wilson interval; the CLI runs in a fresh process."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest
from scipy.stats import binomtest

from conftest import run_cli
from retriage import taxonomy
from retriage.db.versions import mark_counted
from retriage.db.store import connect
from retriage.report.releases import RESOURCE, TEST, newcombe, release_report, wilson
from test_report import plain, terminal

MODEL = "rel-model"
VLLM, LLAMA = taxonomy.engine_by_alias("vllm"), taxonomy.engine_by_alias("llama.cpp")
RESOURCE_IDS = taxonomy.resource_class_ids()
# (release, sort_key, issues, class of each issue in order): vLLM 0.10 carries many more RE.3 reports
PLAN = [("0.8", 8000.0, ["none"] * 54 + ["RE.1"] * 3 + ["RE.3"] * 3),
        ("0.9", 9000.0, ["none"] * 52 + ["RE.1"] * 4 + ["RE.3"] * 4),
        ("0.10", 10000.0, ["none"] * 22 + ["RE.1"] * 2 + ["RE.3"] * 16),
        ("main", 1e9, ["none"] * 4 + ["RE.2"])]


def _version(release: str, key: float) -> str:
    return f"{release}.1" if release != "main" else "main"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The database, and the expected counts {(release, class): n} of vLLM's reported issues."""
    path = tmp_path_factory.mktemp("releases") / "releases.duckdb"
    con = connect(path)
    expected: dict[tuple[str, str], int] = {}
    number = 0
    issues, preds, versions, gold, corrections = [], [], [], [], []
    for release, key, classes in PLAN:
        for i, cls in enumerate(classes):
            number += 1
            issues.append((VLLM.repo, number, False))
            versions.append((VLLM.repo, number, "vllm", _version(release, key), release, key, "reported"))
            expected[(release, cls)] = expected.get((release, cls), 0) + 1
            # the stored class reaches `cls` three ways: a prediction, a team label over a wrong prediction, or a
            # correction over both
            way = number % 3
            preds.append((VLLM.repo, number, cls if way == 0 else "RE.4", number % 29 == 0 and way != 0))
            if way == 1:
                gold.append((VLLM.repo, number, cls))
            if way == 2:
                gold.append((VLLM.repo, number, "RE.4"))
                corrections.append((VLLM.repo, number, "RE.2", "2025-01-01"))  # older: not in force
                corrections.append((VLLM.repo, number, cls, "2025-02-01"))
    # an issue that names 0.8.2 and main counts once, under 0.8; an unlabeled one counts as unlabeled
    number += 1
    issues.append((VLLM.repo, number, False))
    versions += [(VLLM.repo, number, "vllm", "0.8.2", "0.8", 8002.0, "reported"),
                 (VLLM.repo, number, "vllm", "main", "main", 1e9, "reported")]
    expected[("0.8", "unlabeled")] = 1
    # regression reports: worked on 0.9, broke on 0.10; counted apart under 0.10
    for _ in range(3):
        number += 1
        issues.append((VLLM.repo, number, False))
        preds.append((VLLM.repo, number, "RE.1", False))
        versions += [(VLLM.repo, number, "vllm", "0.9.2", "0.9", 9002.0, "good"),
                     (VLLM.repo, number, "vllm", "0.10.0", "0.10", 10000.0, "bad")]
    # a pull request with a version: left out unless include_prs
    number += 1
    issues.append((VLLM.repo, number, True))
    preds.append((VLLM.repo, number, "RE.3", False))
    versions.append((VLLM.repo, number, "vllm", "0.10.1", "0.10", 10001.0, "reported"))
    # llama.cpp: two build ranges, the former repository name counts as llama.cpp
    for n, (repo, release, key, cls) in enumerate([(LLAMA.repo, "b5000-b5499", 5000.0, "RE.1"),
                                                   (LLAMA.former_repos[0], "b5500-b5999", 5600.0, "none")]):
        issues.append((repo, 100 + n, False))
        preds.append((repo, 100 + n, cls, False))
        versions.append((repo, 100 + n, "llama.cpp", f"b{int(key)}", release, key, "reported"))
    con.executemany("INSERT INTO issues (repo, number, title, created_at, is_pull_request, html_url) "
                    "VALUES (?, ?, 'issue', TIMESTAMP '2025-05-01', ?, 'https://github.com/x')", issues)
    con.executemany("INSERT INTO predictions (repo, number, re_class, component, confidence, abstained, "
                    "known_fixes, model_version, labeled_at) VALUES (?, ?, ?, 'operators', 0.9, ?, [], "
                    f"'{MODEL}', TIMESTAMP '2025-06-01')", preds)
    con.executemany("INSERT INTO gold_labels (repo, number, re_class, component, known_fix) "
                    "VALUES (?, ?, ?, 'operators', 'none')", gold)
    con.executemany("INSERT INTO corrections (repo, number, re_class, component, known_fix, reason, corrected_by, "
                    "corrected_at) VALUES (?, ?, ?, 'operators', 'none', 'test', 'test', ?::TIMESTAMP)", corrections)
    con.executemany("INSERT INTO issue_versions (repo, number, engine, version, release, sort_key, role, source) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, 'source line')", versions)
    mark_counted(con)  # as db/versions.store does after writing an issue's rows
    con.close()
    return path, expected


def test_counts_follow_the_label_in_force_and_regressions_count_apart(built):
    path, expected = built
    con = connect(path, read_only=True)
    rep = release_report(con, engines=["vllm", "llama.cpp"], model_version=MODEL)
    vllm, llama = rep.engines
    assert [r.release for r in vllm.releases] == ["0.8", "0.9", "0.10", "main"]  # in order, main last
    got = {(r.release, c): n for r in vllm.releases for c, n in r.counts.items() if n}
    assert got == expected
    by = {r.release: r for r in vllm.releases}
    assert by["0.10"].regressions == {"RE.1": 3} and sum(by["0.9"].regressions.values()) == 0
    assert vllm.regressions == 3 and vllm.issues == sum(expected.values())
    assert by["0.8"].before is not None and sum(by["0.8"].before.values()) == 0
    assert by["0.10"].before_share(RESOURCE).n == by["0.8"].labeled + by["0.9"].labeled
    assert by["main"].before is None and not by["main"].flags  # main is never compared
    assert [(r.release, sum(r.counts.values())) for r in llama.releases] == [("b5000-b5499", 1), ("b5500-b5999", 1)]
    with_prs = release_report(con, engines=["vllm"], model_version=MODEL, include_prs=True)
    assert {r.release: r.counts["RE.3"] for r in with_prs.engines[0].releases}["0.10"] == expected[("0.10", "RE.3")] + 1


def test_intervals_and_flags_agree_with_an_independent_computation(built):
    path, _ = built
    rep = release_report(connect(path, read_only=True), engines=["vllm"], model_version=MODEL)
    flagged = set()
    for r in rep.engines[0].releases:
        for what in [RESOURCE, *RESOURCE_IDS]:
            s = r.share(what)
            if s.n:
                ci = binomtest(s.count, s.n).proportion_ci(0.95, method="wilson")
                assert s.interval == pytest.approx((ci.low, ci.high), abs=1e-9)
            b = r.before_share(what)
            if b is None or not b.n or not s.n:
                continue
            a = binomtest(s.count, s.n).proportion_ci(0.95, method="wilson")
            c = binomtest(b.count, b.n).proportion_ci(0.95, method="wilson")
            p1, p2 = s.count / s.n, b.count / b.n
            low = p1 - p2 - math.sqrt((p1 - a.low) ** 2 + (c.high - p2) ** 2)
            if low > 0:
                flagged.add((r.release, what))
    assert flagged == {(r.release, f.what) for r in rep.engines[0].releases for f in r.flags}
    assert ("0.10", RESOURCE) in flagged and ("0.10", "RE.3") in flagged and not any(r == "0.9" for r, _ in flagged)


def test_statistics_edges():
    assert wilson(0, 0) is None and newcombe(1, 2, 0, 0) is None
    low, high = wilson(0, 10)
    assert low == 0 and 0 < high < 0.35
    d, lo, hi = newcombe(5, 10, 5, 10)
    assert d == 0 and lo < 0 < hi


def _cli(db: Path, *args, **kw):
    return run_cli("report", "--releases", "--model-version", MODEL, *args, db=db, **kw)


def test_cli_json_csv_pipe_and_terminal(built):
    path, expected = built
    doc = json.loads(_cli(path, "--json").stdout)
    assert doc["report"] == "releases" and doc["schema_version"] == 1 and doc["test"] == TEST
    [vllm] = [e for e in doc["engines"] if e["engine"] == "vllm"]
    assert {(r["release"], c): n for r in vllm["releases"] for c, n in r["counts"].items() if n} == expected
    ten = {r["release"]: r for r in vllm["releases"]}["0.10"]
    assert {f["what"] for f in ten["flags"]} >= {RESOURCE, "RE.3"} and ten["regressions"]["issues"] == 3

    csv_rows = list(csv.reader(io.StringIO(_cli(path, "--format", "csv").stdout)))
    piped = _cli(path).stdout  # not a terminal: tab-separated, a header, one row per line
    assert [line.split("\t") for line in piped.splitlines()] == csv_rows
    assert csv_rows[0][:3] == ["engine", "release", "issues"]
    assert ["vllm", "0.10"] in [row[:2] for row in csv_rows]

    for width in (80, 200):
        r = _cli(path, env=terminal(width))
        assert r.returncode == 0, r.stderr
        out = plain(r.stdout)
        assert max(len(line.rstrip()) for line in out.splitlines()) <= width
        assert "▲ vLLM 0.10 resource:" in out and "Newcombe" in out
        for cell in ("release", "issues", *RESOURCE_IDS, "res.", "95% CI", "before", "regr."):
            assert cell in out, (width, cell)
        row = next(line.split() for line in out.splitlines() if line.strip().startswith("0.10 "))
        assert row[:2] == ["0.10", str(sum(n for (rel, _), n in expected.items() if rel == "0.10"))]


@pytest.mark.slow  # renders the chart with vl-convert
def test_cli_html_and_png(built, tmp_path):
    path, _ = built
    page, png = tmp_path / "releases.html", tmp_path / "releases.png"
    assert _cli(path, "--format", "html", "-o", str(page)).returncode == 0
    text = page.read_text()
    assert "vegaEmbed" in text and "Newcombe" in text and "0.10" in text
    assert _cli(path, "--format", "png", "-o", str(png)).returncode == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_errors_are_one_line(tmp_path):
    empty = tmp_path / "empty.duckdb"
    connect(empty).close()
    for args, code, message in ((["--releases"], 1, "no issue of this selection has an engine version"),
                                (["--releases", "--weeks", "3"], 2, "--releases takes"),
                                (["--releases", "--components"], 2, "give one of"),
                                (["--releases", "--engine", "tgi"], 2, "unknown engine 'tgi'")):
        r = run_cli("report", *args, db=empty)
        assert r.returncode == code and r.stdout == "", (args, r.stderr)
        assert r.stderr.startswith("retriage: error: ") and message in r.stderr and r.stderr.count("\n") == 1


def test_the_chart_leaves_out_releases_of_too_few_labeled_issues(built):
    from retriage.report import release_render as view

    path, _ = built
    con = connect(path, read_only=True)
    rep = release_report(con, model_version=MODEL)
    con.close()
    plotted = set()

    def rows(node):  # every data row of the Vega-Lite spec, wherever altair put it
        if isinstance(node, dict):
            if "engine" in node and "release" in node and "share" in node:
                plotted.add((node["engine"], node["release"]))
            for v in node.values():
                rows(v)
        elif isinstance(node, list):
            for v in node:
                rows(v)

    rows(view.chart(rep).to_dict())
    ordered = {(e.name, r.release): r.share("resource").n for e in rep.engines for r in e.releases if r.ordered}
    assert any(n < view.CHART_MIN_LABELED for n in ordered.values())  # the data has such a release
    assert plotted == {k for k, n in ordered.items() if n >= view.CHART_MIN_LABELED}
