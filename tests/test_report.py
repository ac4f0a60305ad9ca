"""The weekly report against direct SQL counts on a real DuckDB file: the bundled snapshot imported, predictions of
a chosen model version written with SQL (some abstained, some missing, some of another version), a few
TensorRT-LLM issues and pull requests on day boundaries. The CLI runs in a fresh process, as a user runs it."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import SNAPSHOT, run_cli
from retriage import taxonomy
from retriage.cli import app
from retriage.db.importer import import_files
from retriage.db.store import connect
from retriage.report import render
from retriage.report.weekly import weekly_report

pytestmark = pytest.mark.slow  # a local GitHub server or a labeled database per file: the full tier only

MODEL = "test-model-1"
OTHER_MODEL = "test-model-0"
TRT = taxonomy.engine_by_alias("trtllm")
# Synthetic TensorRT-LLM records on the edges of May 2024 (the snapshot has no TensorRT-LLM issues).
TRT_ROWS = [  # number, created_at, is_pull_request
    (9001, "2024-05-01 00:00:00", False),
    (9002, "2024-05-31 23:59:59", False),
    (9003, "2024-06-01 00:00:00", False),
    (9004, "2024-04-30 23:59:59", False),
    (9005, "2024-05-15 12:00:00", True),
]


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("report") / "report.duckdb"
    con = connect(path)
    import_files(con, sorted(SNAPSHOT.glob("*.jsonl.gz")))
    for number, created, is_pr in TRT_ROWS:
        con.execute("INSERT INTO issues (repo, number, title, created_at, is_pull_request, html_url) "
                    "VALUES (?, ?, ?, ?::TIMESTAMP, ?, ?)",
                    [TRT.repo, number, f"trt {number}", created, is_pr,
                     f"https://github.com/{TRT.repo}/{'pull' if is_pr else 'issues'}/{number}"])
    # Every issue but those with number % 10 == 3 gets a prediction of MODEL, spread over the taxonomy's lists.
    con.execute("""
        INSERT INTO predictions (repo, number, re_class, component, confidence, component_confidence, abstained,
                                 known_fixes, model_version, labeled_at)
        SELECT repo, number, $classes[1 + (hash(repo, number) % len($classes))::BIGINT],
               $components[1 + (hash(number, repo) % len($components))::BIGINT],
               0.9, 0.8, number % 13 = 0, [], $model, TIMESTAMP '2025-08-01'
        FROM issues WHERE number % 10 <> 3""",
        {"classes": taxonomy.re_class_ids(), "components": taxonomy.component_ids(), "model": MODEL})
    # Another model version labels everything with the first class: must never show up.
    con.execute("INSERT INTO predictions SELECT repo, number, $c, $k, 0.5, 0.5, false, [], $m, now()::TIMESTAMP "
                "FROM issues", {"c": taxonomy.re_class_ids()[0], "k": taxonomy.component_ids()[0],
                                "m": OTHER_MODEL})
    con.close()
    return path


@pytest.fixture(scope="module")
def con(db):
    c = connect(db, read_only=True)
    yield c
    c.close()


def sql_counts(con, by="re_class", repos=None, since=None, until=None, include_prs=False) -> dict:
    """{(iso week 'YYYY-Www', category): n}, written independently of the report's SQL."""
    category = ("CASE WHEN p.number IS NULL THEN 'unlabeled' WHEN p.abstained THEN 'unsure' ELSE p.re_class END"
                if by == "re_class" else "coalesce(p.component, 'unlabeled')")
    where, params = ["(? OR NOT i.is_pull_request)"], [include_prs]
    if repos:
        where.append("i.repo IN (SELECT unnest(?))")
        params.append(repos)
    if since:
        where.append("CAST(i.created_at AS DATE) >= ?")
        params.append(since)
    if until:
        where.append("CAST(i.created_at AS DATE) <= ?")
        params.append(until)
    rows = con.execute(f"""
        SELECT strftime(i.created_at, '%G-W%V'), {category}, count(*)
        FROM issues i LEFT JOIN predictions p ON (p.repo, p.number, p.model_version) = (i.repo, i.number, ?)
        WHERE {' AND '.join(where)} GROUP BY 1, 2""", [MODEL, *params]).fetchall()
    return {(w, c): n for w, c, n in rows}


def report_counts(section) -> dict:
    return {(w.iso_week, c): n for w in section.weeks for c, n in w.counts.items() if n}


def test_counts_equal_direct_sql(con):
    rep = weekly_report(con, model_version=MODEL)
    assert [s.engine for s in rep.sections] == ["all"]
    expected = sql_counts(con)
    assert report_counts(rep.sections[0]) == expected
    assert rep.issues == sum(expected.values()) == con.execute(
        "SELECT count(*) FROM issues WHERE NOT is_pull_request").fetchone()[0]
    assert rep.labeled == con.execute(
        "SELECT count(*) FROM issues i JOIN predictions p USING (repo, number) "
        "WHERE NOT i.is_pull_request AND p.model_version = ?", [MODEL]).fetchone()[0]
    names = taxonomy.re_class_ids()
    assert rep.categories == [*names, "unsure", "unlabeled"]  # taxonomy order, then unsure and unlabeled
    totals = rep.sections[0].totals
    for c in rep.categories:
        assert totals.counts[c] == sum(n for (_, cat), n in expected.items() if cat == c)
        assert totals.share(c) == pytest.approx(totals.counts[c] / rep.issues)
    week = rep.sections[0].weeks[-1]
    assert sum(week.shares.values()) == pytest.approx(1.0)


def test_weeks_are_dense_iso_mondays_with_zero_weeks(con):
    rep = weekly_report(con, engines=["vllm"], model_version=MODEL)
    weeks = rep.weeks
    assert all(w.weekday() == 0 for w in weeks)
    assert all(b - a == timedelta(days=7) for a, b in zip(weeks, weeks[1:]))
    first, last = con.execute("SELECT min(created_at), max(created_at) FROM issues WHERE repo = ?",
                              [taxonomy.engine_by_alias("vllm").repo]).fetchone()
    assert weeks[0] == first.date() - timedelta(days=first.weekday())
    assert weeks[-1] == last.date() - timedelta(days=last.weekday())
    busy = {w for (w, _) in sql_counts(con, repos=[taxonomy.engine_by_alias("vllm").repo])}
    zero = [w for w in rep.sections[0].weeks if w.total == 0]
    assert zero, "the vLLM snapshot has weeks without issues; they must appear as rows"
    assert {w.iso_week for w in zero} == {w.iso_week for w in rep.sections[0].weeks} - busy
    assert all(set(w.counts) == set(rep.categories) and not any(w.counts.values()) for w in zero)


def test_range_beyond_the_data_stops_at_the_datas_last_week(con):
    rep = weekly_report(con, since="2025-07-01", until="2025-08-31", model_version=MODEL)
    last = con.execute("SELECT max(created_at) FROM issues WHERE NOT is_pull_request").fetchone()[0].date()
    assert last < date(2025, 8, 1)  # the snapshot ends in July 2025
    # no empty week after the data is a row (before: zero weeks up to 2025-08-25)
    assert rep.weeks[0] == date(2025, 6, 30) and rep.weeks[-1] == last - timedelta(days=last.weekday())
    assert report_counts(rep.sections[0]) == sql_counts(con, since="2025-07-01", until="2025-08-31")


WIDE = {"since": "1970-01-01", "until": "9998-12-31"}  # the widest days the options take


def _without_bounds(rep) -> dict:
    return {k: v for k, v in render.to_dict(rep).items() if k not in ("since", "until")}


@pytest.mark.parametrize("options", [{}, {"per_engine": True, "by": "component"},
                                     {"engines": ["trtllm"], "include_prs": True}])
def test_the_widest_range_gives_the_rows_of_the_datas_own_span(con, options):
    """1970-01-01..9998-12-31 is about 417,000 weeks; the data spans about 125. The rows (weeks, days, counts,
    the last full week, the newest issues) are those of the data's own span: no empty week outside it."""
    own = weekly_report(con, model_version=MODEL, **options)
    wide = weekly_report(con, model_version=MODEL, **WIDE, **options)
    assert wide.since == date(1970, 1, 1) and wide.until == date(9998, 12, 31)
    assert len(wide.weeks) == len(own.weeks) < 200
    assert _without_bounds(wide) == _without_bounds(own)
    inside = weekly_report(con, model_version=MODEL, since="1970-01-01", until=own.weeks[-1] + timedelta(days=6),
                           **options)
    assert inside.weeks == own.weeks  # a range reaching out on one side only is cut there too


def test_issues_centuries_apart_are_refused_unless_the_weeks_are_cut(tmp_path):
    """Rows are dense, so two issues 8,000 years apart would be 417,000 rows: refused in one line, while
    --weeks or day bounds that cut the span still answer."""
    from retriage.core.errors import UsageError

    path = tmp_path / "span.duckdb"
    c = connect(path)
    for number, created in ((1, "1971-06-01"), (2, "2025-03-03"), (3, "9998-06-01")):
        c.execute("INSERT INTO issues (repo, number, title, created_at, is_pull_request, html_url) "
                  "VALUES (?, ?, 't', ?::TIMESTAMP, false, 'https://x')", [TRT.repo, number, created])
    with pytest.raises(UsageError, match=r"span 418,829 weeks \(1971-06-01 to 9998-06-01\)"):
        weekly_report(c, model_version=MODEL)
    with pytest.raises(UsageError, match="--weeks"):
        weekly_report(c, model_version=MODEL, **WIDE)
    assert len(weekly_report(c, model_version=MODEL, last_weeks=8).weeks) == 8
    assert weekly_report(c, model_version=MODEL, since="2025-01-01", until="2025-12-31").issues == 1
    c.close()


def test_date_bounds_are_inclusive_days(con):
    rep = weekly_report(con, engines=["trtllm"], since="2024-05-01", until="2024-05-31", model_version=MODEL)
    assert rep.issues == 2  # 9001 at 00:00:00 on the first day, 9002 at 23:59:59 on the last; not 9003/9004
    assert rep.weeks[0] == date(2024, 4, 29) and rep.weeks[-1] == date(2024, 5, 27)
    assert len(rep.weeks) == 5
    with_prs = weekly_report(con, engines=["trtllm"], since="2024-05-01", until="2024-05-31", include_prs=True,
                             model_version=MODEL)
    assert with_prs.issues == 3
    one_day = weekly_report(con, engines=["trtllm"], since="2024-06-01", until="2024-06-01", model_version=MODEL)
    assert one_day.issues == 1 and len(one_day.weeks) == 1


def test_engine_filter_and_per_engine_sections(con):
    vllm, sglang = taxonomy.engine_by_alias("vllm"), taxonomy.engine_by_alias("sglang")
    rep = weekly_report(con, engines=["sglang", "vllm", "trtllm"], per_engine=True, since="2025-01-01",
                        until="2025-03-31", model_version=MODEL)
    assert [s.engine for s in rep.sections] == [e.id for e in taxonomy.engines() if e.id != "llama.cpp"]
    by_id = {s.engine: s for s in rep.sections}
    for e in (vllm, sglang):
        assert report_counts(by_id[e.id]) == sql_counts(con, repos=[e.repo], since="2025-01-01",
                                                        until="2025-03-31")
    assert by_id["trtllm"].totals.total == 0 and len(by_id["trtllm"].weeks) == len(rep.weeks)
    together = weekly_report(con, engines=["vllm,sglang"], since="2025-01-01", until="2025-03-31",
                             model_version=MODEL)
    assert report_counts(together.sections[0]) == sql_counts(con, repos=[vllm.repo, sglang.repo],
                                                             since="2025-01-01", until="2025-03-31")


def test_by_component(con):
    rep = weekly_report(con, by="component", model_version=MODEL, per_engine=True)
    assert rep.categories == [*taxonomy.component_ids(), "unlabeled"]  # abstaining is about the class
    for s in rep.sections:
        engine = taxonomy.engine_by_alias(s.engine)
        assert report_counts(s) == sql_counts(con, by="component", repos=[engine.repo])


def test_other_model_version_and_no_model(con):
    other = weekly_report(con, model_version=OTHER_MODEL)
    assert "unsure" not in other.categories  # shown only when the classifier abstained
    assert other.labeled == other.issues
    none = weekly_report(con, model_version=None)
    assert none.labeled == 0 and none.sections[0].totals.counts["unlabeled"] == none.issues
    assert "retriage label" in render.no_labels_message(none)


def test_last_week_change_and_newest_issues(con):
    rep = weekly_report(con, engines=["vllm"], model_version=MODEL)
    s = rep.sections[0]
    ch = s.change
    weeks = s.weeks
    as_of = con.execute("SELECT max(created_at) FROM issues").fetchone()[0]
    assert rep.as_of == as_of and weeks[-1].week <= as_of.date() < weeks[-1].week + timedelta(days=6)
    assert weeks[-1].partial and weeks[-1].days == (as_of.date() - weeks[-1].week).days + 1
    assert not any(w.partial for w in weeks[:-1])
    # The partial last week is left out: the change is the week before against the four before that.
    assert ch.week == weeks[-2].week and ch.excluded == (weeks[-1].week,) and ch.baseline_weeks == 4
    for c in rep.categories:
        mean = sum(w.counts[c] for w in weeks[-6:-2]) / 4
        assert ch.baseline[c] == pytest.approx(mean)
        assert ch.delta(c) == pytest.approx(weeks[-2].counts[c] - mean)
    resource = taxonomy.resource_class_ids()
    expected = con.execute("""
        SELECT p.re_class, i.number FROM issues i JOIN predictions p USING (repo, number)
        WHERE i.repo = ? AND p.model_version = ? AND NOT p.abstained AND list_contains(?, p.re_class)
          AND NOT i.is_pull_request
        QUALIFY row_number() OVER (PARTITION BY p.re_class ORDER BY i.created_at DESC) <= 3
        ORDER BY list_position(?, p.re_class), i.created_at DESC""",
        [taxonomy.engine_by_alias("vllm").repo, MODEL, resource, resource]).fetchall()
    assert expected
    assert [(n.category, n.number) for n in s.newest] == expected  # the newest of the weeks shown
    assert all(n.html_url.endswith(f"/issues/{n.number}") for n in s.newest)


def test_partial_first_week_and_the_datas_last_week(con):
    rep = weekly_report(con, engines=["vllm"], since="2025-06-04", until="2025-08-10", model_version=MODEL)
    weeks = rep.sections[0].weeks
    assert weeks[0].week == date(2025, 6, 2) and weeks[0].days == 5 and weeks[0].partial  # Wednesday to Sunday
    as_of = rep.as_of.date()
    # the rows end with the data's last week (partial: the data ends inside it), none after it
    assert weeks[-1].week <= as_of < weeks[-1].week + timedelta(days=7)
    assert weeks[-1].partial and weeks[-1].days == (as_of - weeks[-1].week).days + 1
    full = [w for w in weeks if not w.partial]
    ch = rep.sections[0].change
    assert ch.week == full[-1].week and ch.baseline_weeks == 4  # the cut first week is not in the baseline
    assert ch.baseline_total == pytest.approx(sum(w.total for w in full[-5:-1]) / 4)
    assert set(ch.excluded) == {w.week for w in weeks if w.week > ch.week}
    assert rep.partial_weeks == [w.week for w in weeks if w.partial]


def test_last_weeks_keeps_the_end_of_the_range(con):
    full = weekly_report(con, model_version=MODEL)
    tail = weekly_report(con, model_version=MODEL, last_weeks=6)
    assert tail.weeks == full.weeks[-6:]
    assert [w.counts for w in tail.sections[0].weeks] == [w.counts for w in full.sections[0].weeks[-6:]]
    assert tail.issues == sum(w.total for w in full.sections[0].weeks[-6:])
    short = weekly_report(con, model_version=MODEL, last_weeks=2)  # the baseline still spans 4 weeks
    assert short.sections[0].change == full.sections[0].change and short.sections[0].change.baseline_weeks == 4
    assert short.weeks == full.weeks[-2:]


def test_json_schema_is_stable(con):
    rep = weekly_report(con, model_version=MODEL, per_engine=True, last_weeks=8)
    doc = render.to_dict(rep)
    assert list(doc) == ["schema_version", "report", "by", "model_version", "engines", "per_engine",
                         "include_prs", "since", "until", "first_week", "last_week", "as_of", "partial_weeks",
                         "categories", "issues", "labeled", "sections"]
    assert doc["schema_version"] == render.SCHEMA_VERSION == 2
    section = doc["sections"][0]
    assert list(section) == ["engine", "name", "weeks", "totals", "last_week", "newest"]
    assert list(section["weeks"][0]) == ["week", "iso_week", "days", "partial", "total", "counts", "shares"]
    assert list(section["weeks"][0]["counts"]) == [c["id"] for c in doc["categories"]]
    assert list(section["last_week"]) == ["week", "excluded_partial_weeks", "total", "counts", "baseline_weeks",
                                          "baseline_mean", "change", "change_ratio"]
    assert list(section["newest"][0]) == ["category", "ref", "repo", "number", "title", "created_at",
                                          "html_url", "confidence"]
    assert render.to_json(rep) == render.to_json(weekly_report(con, model_version=MODEL, per_engine=True,
                                                               last_weeks=8))


def _cli(db, *args, **kw):
    return run_cli("report", "--weekly", "--model-version", MODEL, *args, db=db, **kw)


def terminal(width: int) -> dict:
    """The environment of a terminal `width` columns wide (Rich's TTY_COMPATIBLE), without colours."""
    return {"TTY_COMPATIBLE": "1", "NO_COLOR": "1", "TERM": "xterm", "COLUMNS": str(width)}


def plain(text: str) -> str:
    """Terminal output without its style and hyperlink escapes."""
    return re.sub(r"\x1b\[[0-9;]*m|\x1b\]8;[^\x1b]*\x1b\\", "", text)


def test_cli_json_and_csv_match_sql(db, con):
    r = _cli(db, "--engine", "sglang", "--since", "2025-01-01", "--until", "2025-03-31", "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["engines"] == ["sglang"] and doc["since"] == "2025-01-01" and doc["until"] == "2025-03-31"
    expected = sql_counts(con, repos=[taxonomy.engine_by_alias("sglang").repo], since="2025-01-01",
                          until="2025-03-31")
    got = {(w["iso_week"], c): n for w in doc["sections"][0]["weeks"] for c, n in w["counts"].items() if n}
    assert got == expected

    r = _cli(db, "--by", "component", "--per-engine", "--format", "csv", "--all")
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    comps = taxonomy.component_ids()
    assert list(rows[0]) == ["engine", "week", "iso_week", "days", "partial", "total", *comps, "unlabeled",
                             *(f"{c}_share" for c in [*comps, "unlabeled"])]
    for e in ("vllm", "sglang", "llama.cpp", "trtllm"):
        repo = taxonomy.engine_by_alias(e).repo
        got = {(row["iso_week"], c): int(row[c]) for row in rows if row["engine"] == e
               for c in [*comps, "unlabeled"] if int(row[c])}
        assert got == sql_counts(con, by="component", repos=[repo])
    assert all(int(row["total"]) == sum(int(row[c]) for c in [*comps, "unlabeled"]) for row in rows)


def test_cli_table_ends_with_totals_change_and_newest_links(db, con):
    r = _cli(db, "--engine", "vllm", "--weeks", "6", env=terminal(140))
    assert r.returncode == 0, r.stderr
    out = plain(r.stdout)
    for text in ("Issues per week by RE classes", "total", "4-wk mean", "Δ ", "Newest issues", "* partial week",
                 "https://github.com/vllm-project/vllm/issues/", *taxonomy.resource_class_ids()):
        assert text in out, text
    rep = weekly_report(con, engines=["vllm"], model_version=MODEL, last_weeks=6)
    lines = [line.replace("*", "").split() for line in out.splitlines()]
    for w in rep.sections[0].weeks:  # one row per week: the Monday, then the issue count
        assert [w.week.isoformat(), str(w.total)] in [cells[:2] for cells in lines], w.week
    partial = [line for line in out.splitlines() if re.match(r"\s*\d{4}-\d\d-\d\d\*", line)]
    assert [line.split()[0] for line in partial] == [f"{w.week}*" for w in rep.sections[0].weeks if w.partial]


@pytest.mark.slow  # renders PNG and HTML charts with vl-convert
def test_cli_charts(db, tmp_path, monkeypatch):
    png = tmp_path / "weekly.png"
    r = _cli(db, "--weeks", "10", "--format", "png", "--output", str(png))
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000

    # Without --output: a default file name in the working folder, and its absolute path printed. In-process
    # (the same Typer app) so that the file lands in this test's folder, not in the checkout.
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["report", "--model-version", MODEL, "--by", "component", "--per-engine",
                                 "--format", "html", "--db", str(db)])
    assert r.exit_code == 0, r.output
    html = tmp_path / "retriage-weekly-component.html"
    assert r.output.strip() == f"wrote report {html}"
    page = html.read_text()
    assert "vega-lite" in page and "vegaEmbed" in page  # self-contained: the Vega bundle is inlined
    assert all(f'"{c}"' in page for c in taxonomy.component_ids())
    assert all(f'"{e.name}"' in page for e in taxonomy.engines() if e.id != "trtllm")
    assert '"week_end"' in page and '"2025-07-14"' in page  # the data is in the page


def test_cli_the_widest_range_answers_like_the_datas_own_span(db):
    """`--since 1970-01-01 --until 9998-12-31 --all` as table, JSON and CSV: the output of the data's own span
    (before: no answer in 300 s, 2.8 GB for the JSON). The timeout is only a safety net."""
    wide = ("--since", WIDE["since"], "--until", WIDE["until"], "--all")
    for fmt in ("table", "json", "csv"):
        own = _cli(db, "--all", "--format", fmt, env={"COLUMNS": "140"}, timeout=120)
        far = _cli(db, *wide, "--format", fmt, env={"COLUMNS": "140"}, timeout=120)
        assert own.returncode == far.returncode == 0, far.stderr
        if fmt == "json":
            own_doc, far_doc = json.loads(own.stdout), json.loads(far.stdout)
            assert (far_doc.pop("since"), far_doc.pop("until")) == (WIDE["since"], WIDE["until"])
            del own_doc["since"], own_doc["until"]
            assert far_doc == own_doc and len(far_doc["sections"][0]["weeks"]) < 200
        else:
            assert far.stdout == own.stdout, fmt


@pytest.mark.slow  # renders PNG and HTML charts with vl-convert
def test_cli_the_widest_range_draws_the_charts_of_the_datas_own_span(db, tmp_path):
    """PNG, and the HTML page per engine (before: 7.9 GB and 4.6 GB of memory, no answer in 300 s): the same
    bytes as over the data's own span."""
    wide = ("--since", WIDE["since"], "--until", WIDE["until"], "--all")
    for fmt, extra in (("png", ()), ("html", ("--per-engine",))):
        own, far = tmp_path / f"own.{fmt}", tmp_path / f"wide.{fmt}"
        for out, args in ((own, ("--all",)), (far, wide)):
            r = _cli(db, *args, *extra, "--format", fmt, "--output", str(out), timeout=120)
            assert r.returncode == 0, r.stderr
        assert far.read_bytes() == own.read_bytes(), fmt


@pytest.mark.parametrize("args, message, code", [
    (["--since", "2025-02-30"], "--since must be a day as YYYY-MM-DD", 2),
    (["--until", "yesterday"], "--until must be a day as YYYY-MM-DD", 2),
    (["--since", "2025-03-01", "--until", "2025-02-01"], "is after --until", 2),
    (["--engine", "tgi"], "unknown engine 'tgi'", 2),
    (["--by", "label"], "Invalid value for '--by'", 2),  # a declared choice: Click's check, same code
    (["--format", "xlsx"], "Invalid value for '--format'", 2),
    (["--weeks", "0"], "--weeks must be from 1", 2),
    (["--weeks", "3", "--all"], "--weeks N or --all", 2),
    (["--since", "2030-01-01"], "no issues match", 1),  # a valid question with no answer: exit 1
])
def test_cli_bad_values_are_one_line_errors(db, args, message, code):
    r = _cli(db, *args)
    assert r.returncode == code
    assert r.stdout == ""
    assert r.stderr.startswith("retriage: error: ") and message in r.stderr and r.stderr.count("\n") == 1


def test_cli_without_labels_says_how_to_get_them(db):
    r = run_cli("report", "--weekly", "--model-version", "never-trained", db=db)
    assert r.returncode == 1 and r.stdout == ""
    assert "retriage label" in r.stderr and r.stderr.count("\n") == 1
