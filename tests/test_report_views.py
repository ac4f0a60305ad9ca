"""The report's views on the real DuckDB file of tests/test_report.py (the bundled snapshot with predictions
written in SQL): the partial week in JSON and the change, the HTML page and its issue links, one palette for
every chart, the 12-week default, and the component shares beside the published ones."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from datetime import date, datetime, timedelta

import pytest

from conftest import run_cli
from retriage import taxonomy
from retriage.core.refs import format_ref
from retriage.db.store import connect
from retriage.report import chart, palette
from retriage.report.components import component_shares, reference_shares
from retriage.report.weekly import weekly_report
from test_report import MODEL, con, db, plain, sql_counts, terminal  # noqa: F401  (the module's fixtures)

pytestmark = pytest.mark.slow  # a local GitHub server or a labeled database per file: the full tier only

VLLM = taxonomy.engine_by_alias("vllm")


def _cli(db, *args, **kw):
    return run_cli("report", "--model-version", MODEL, *args, db=db, **kw)


def test_json_marks_the_partial_week_and_the_change_leaves_it_out(db, con):
    r = _cli(db, "--engine", "vllm", "--all", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    weeks = doc["sections"][0]["weeks"]
    as_of = con.execute("SELECT max(created_at) FROM issues").fetchone()[0]
    assert doc["as_of"] == as_of.isoformat()
    last = weeks[-1]
    monday = date.fromisoformat(last["week"])
    assert last["partial"] is True and last["days"] == (as_of.date() - monday).days + 1 < 7
    assert doc["partial_weeks"] == [last["week"]] and not any(w["partial"] for w in weeks[:-1])
    change = doc["sections"][0]["last_week"]
    assert change["week"] == weeks[-2]["week"] and change["excluded_partial_weeks"] == [last["week"]]
    before = weeks[-6:-2]
    for c in [x["id"] for x in doc["categories"]]:
        mean = sum(w["counts"][c] for w in before) / 4
        assert change["baseline_mean"]["counts"][c] == pytest.approx(mean, abs=1e-4)
        assert change["change"]["counts"][c] == pytest.approx(weeks[-2]["counts"][c] - mean, abs=1e-4)
    assert change["total"] == weeks[-2]["total"]


def test_table_shows_the_last_12_weeks_unless_told(db, con):
    full = weekly_report(con, model_version=MODEL)
    assert len(full.weeks) > 12
    default = json.loads(_cli(db, "--json").stdout)
    assert default["first_week"] == full.weeks[-12].isoformat() and len(default["sections"][0]["weeks"]) == 12
    everything = json.loads(_cli(db, "--all", "--format", "json").stdout)  # --format json: the old spelling
    assert len(everything["sections"][0]["weeks"]) == len(full.weeks)
    three = json.loads(_cli(db, "--weeks", "3", "--json").stdout)
    assert [w["week"] for w in three["sections"][0]["weeks"]] == [w.isoformat() for w in full.weeks[-3:]]
    since = json.loads(_cli(db, "--since", "2024-01-01", "--json").stdout)  # a range given: all of it
    assert since["first_week"] == "2024-01-01" and len(since["sections"][0]["weeks"]) > 12
    table = plain(_cli(db, env=terminal(160)).stdout)
    rows = [m.group(1) for line in table.splitlines() if (m := re.match(r"\s*(\d{4}-\d\d-\d\d)\*? +\d+ ", line))]
    assert rows == [w.isoformat() for w in full.weeks[-12:]]


@pytest.mark.slow  # renders the chart's page with vl-convert's inline bundle
def test_html_report_has_the_chart_tables_and_links_to_every_issue_of_its_cells(db, con, tmp_path):
    page_path = tmp_path / "report.html"
    r = _cli(db, "--engine", "vllm", "--weeks", "4", "--format", "html", "--output", str(page_path))
    assert r.returncode == 0, r.stderr
    page = page_path.read_text()
    assert "vegaEmbed" in page and '"week_end"' in page  # the chart, its data inline
    rep = weekly_report(con, engines=["vllm"], model_version=MODEL, last_weeks=4)
    first = datetime.combine(rep.weeks[0], datetime.min.time())
    expected = {row[0] for row in con.execute("""
        SELECT i.html_url FROM issues i JOIN predictions p USING (repo, number)
        WHERE i.repo = ? AND p.model_version = ? AND NOT p.abstained AND list_contains(?, p.re_class)
          AND NOT i.is_pull_request AND i.created_at >= ?""",
        [VLLM.repo, MODEL, taxonomy.resource_class_ids(), first]).fetchall()}
    assert expected, "the last four vLLM weeks have resource-class issues"
    links = set(re.findall(r'href="(https://github\.com/[^"]+)"', page))
    assert links == expected  # every issue behind a resource-class cell, and nothing else
    for w in rep.sections[0].weeks:  # each non-zero resource cell links to its list, which exists
        for c in taxonomy.resource_class_ids():
            anchor = f"{rep.sections[0].engine}-{w.week.isoformat()}-{c}".replace(".", "_")
            if w.counts[c]:
                assert f'href="#{anchor}"' in page and f'id="{anchor}"' in page, (w.week, c)
                assert f"{c} · {w.counts[c]} issue" in page
            else:
                assert f'id="{anchor}"' not in page
    partial = [w for w in rep.sections[0].weeks if w.partial]
    assert partial and f"{partial[-1].week.isoformat()} (partial, {partial[-1].days} d)" in page
    assert "Δ last full week" in page


def _color_scales(spec) -> dict[str, str]:
    """category -> colour, from every color scale with a domain and range in a Vega-Lite spec."""
    found: dict[str, str] = {}

    def walk(node):
        if isinstance(node, dict):
            scale = node.get("color", {}).get("scale") if isinstance(node.get("color"), dict) else None
            if isinstance(scale, dict) and "domain" in scale and "range" in scale:
                for category, colour in zip(scale["domain"], scale["range"]):
                    assert found.setdefault(category, colour) == colour, category
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(spec)
    return found


def test_one_colour_per_category_in_every_chart(con):
    by_class = _color_scales(chart.weekly_chart(weekly_report(con, model_version=MODEL, last_weeks=8)).to_dict())
    by_component = _color_scales(chart.weekly_chart(
        weekly_report(con, model_version=MODEL, by="component", per_engine=True, last_weeks=8)).to_dict())
    share_rep = component_shares(con, model_version=MODEL)
    share_spec = chart.component_chart(share_rep).to_dict()
    shares = _color_scales(share_spec)
    filters = [f["equal"] for panel in share_spec["vconcat"] for layer in panel["layer"]
               for t in layer.get("transform", []) if isinstance(f := t.get("filter"), dict) and f.get("field") == "engine"]
    assert filters == [e.name for e in share_rep.engines if e.labeled_total]  # a bar panel per engine, its own rows
    assert len(filters) >= 3
    assert set(taxonomy.resource_class_ids()) <= set(by_class)
    assert set(taxonomy.component_ids()) <= set(by_component) and set(taxonomy.component_ids()) <= set(shares)
    merged: dict[str, str] = {}
    for mapping in (by_class, by_component, shares):
        for category, colour in mapping.items():
            assert merged.setdefault(category, colour) == colour, f"{category} changes colour between charts"
    colours = list(merged.values())
    assert len(set(colours)) == len(colours), "two categories share a colour"
    assert merged == {c: palette.color(c) for c in merged}  # all from report/palette.toml


def test_component_shares_match_sql_and_carry_the_published_ones(db, con):
    rep = component_shares(con, engines=["vllm"], since="2025-01-01", until="2025-06-30", model_version=MODEL)
    [e] = rep.engines
    rows = dict(con.execute("""
        SELECT p.component, count(*) FROM issues i JOIN predictions p USING (repo, number)
        WHERE i.repo = ? AND p.model_version = ? AND NOT i.is_pull_request
          AND i.created_at >= DATE '2025-01-01' AND i.created_at < DATE '2025-07-01' GROUP BY 1""",
        [VLLM.repo, MODEL]).fetchall())
    assert {c: n for c, n in e.labeled.items() if n} == rows
    assert e.share("operators") == pytest.approx(rows["operators"] / sum(rows.values()))
    published = reference_shares()
    assert {c: r.share for c, r in e.reference.items()} == {c: r.share for (eng, c), r in published.items()
                                                             if eng == "vllm"}
    assert published[("vllm", "model_loader")].share == 0.21 and "2506.09713" in published[("vllm", "operators")].url

    r = _cli(db, "--components", "--engine", "vllm", "--since", "2025-01-01", "--until", "2025-06-30", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    comps = {c["component"]: c for c in doc["engines"][0]["components"]}
    assert {c: v["labeled"] for c, v in comps.items() if v["labeled"]} == rows
    assert comps["model_loader"]["published_share"] == 0.21 and comps["scheduler"]["published_share"] is None
    table = plain(_cli(db, "--components", "--engine", "vllm", env=terminal(150)).stdout)
    assert "21%" in table and "2506.09713" in table and "engine_setup" in table


def test_a_pipe_gets_tab_separated_rows_with_full_values(db):
    piped, as_csv = _cli(db, "--all", "--per-engine"), _cli(db, "--all", "--per-engine", "--format", "csv")
    assert piped.returncode == as_csv.returncode == 0, piped.stderr
    rows = [line.split("\t") for line in piped.stdout.splitlines()]
    assert rows == list(csv.reader(io.StringIO(as_csv.stdout)))
    assert rows[0][:6] == ["engine", "week", "iso_week", "days", "partial", "total"] and len(rows) > 50
    assert len({len(r) for r in rows}) == 1
    comps = [line.split("\t") for line in _cli(db, "--components").stdout.splitlines()]
    assert comps[0][:3] == ["engine", "component", "labeled"] and len({len(r) for r in comps}) == 1
    assert ["vllm", "model_loader"] in [r[:2] for r in comps]
    table = _cli(db, "--format", "table", env={"COLUMNS": "100"}).stdout  # --format table is obeyed in a pipe
    assert "Issues per week" in table and "\t" not in table


@pytest.mark.parametrize("width", [80, 200])
def test_a_terminal_table_keeps_every_column_and_value_whole(db, con, width):
    rep = weekly_report(con, model_version=MODEL, last_weeks=12)
    assert "unsure" in rep.categories
    out = plain(_cli(db, env=terminal(width)).stdout)
    lines = out.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= width
    header = next(line.split() for line in lines if line.strip().startswith("week (Mon)"))
    assert header == ["week", "(Mon)", "issues", *rep.categories]
    for w in rep.sections[0].weeks:  # every cell of the week on its row: count and share together
        cells = [f"{n} {w.share(c):.0%}" if n else "0" for c, n in w.counts.items()]
        expected = " ".join([f"{w.week}{'*' if w.partial else ''}", str(w.total), *cells]).split()
        assert expected in [line.split() for line in lines], w.week
    for n in rep.sections[0].newest:  # links whole on one line; titles never cut
        assert any(line.strip().endswith(n.html_url) for line in lines), n.html_url
        if width == 200:
            assert any(n.title in line for line in lines), n.title
        ref = format_ref(n.repo, n.number)  # the title column, from the issue's line down to its link
        i = next(k for k, line in enumerate(lines) if re.search(rf"\b{re.escape(ref)}\b", line))
        start = lines[i].index(ref) + len(ref)
        start += len(lines[i][start:]) - len(lines[i][start:].lstrip())
        j = next(k for k in range(i, len(lines)) if n.html_url in lines[k])
        assert " ".join(" ".join(line[start:] for line in lines[i:j]).split()) == " ".join(n.title.split())


def test_a_sample_says_so_in_the_table_and_the_chart(db, con, tmp_path):
    rep = weekly_report(con, model_version=MODEL, last_weeks=8)
    assert rep.sample and rep.sample.startswith("sample data")  # the snapshot imported, nothing mined
    assert "sample data" in plain(_cli(db, "--weeks", "8", env=terminal(120)).stdout).split("week (Mon)")[0]
    assert rep.sample.upper() in json.dumps(chart.weekly_chart(rep).to_dict())
    piped = _cli(db, "--weeks", "8")  # rows only on stdout; the note once on stderr
    assert piped.returncode == 0 and "sample" not in piped.stdout
    assert piped.stderr.strip() == f"retriage: note: {rep.sample}"
    mined = tmp_path / "mined.duckdb"
    shutil.copy(db, mined)
    c = connect(mined)
    c.execute("INSERT INTO sync_state (repo, resource, last_run_at) VALUES ('vllm-project/vllm', 'issues', now())")
    assert weekly_report(c, model_version=MODEL).sample is None
    c.execute("DELETE FROM sync_state")
    c.execute("INSERT INTO issues (repo, number, created_at, is_pull_request) SELECT 'o/dense', i, "
              "TIMESTAMP '2025-01-01', false FROM range(1, 200000) t(i)")  # an import of a whole tracker
    assert weekly_report(c, model_version=MODEL).sample is None
    c.close()


def test_chart_share_points_and_rolling_share_match_sql(con):
    rep = weekly_report(con, engines=["vllm"], model_version=MODEL, last_weeks=10)
    counts = sql_counts(con, repos=[VLLM.repo])
    weeks = [w.iso_week for w in rep.sections[0].earlier + rep.sections[0].weeks]
    res = {w: sum(counts.get((w, c), 0) for c in taxonomy.resource_class_ids()) for w in weeks}
    lab = {w: sum(counts.get((w, c), 0) for c in taxonomy.re_class_ids()) for w in weeks}
    records = chart.share_records(rep)
    assert len(records) == 10
    for i, r in enumerate(records, len(weeks) - 10):
        assert (r["resource"], r["labeled"]) == (res[weeks[i]], lab[weeks[i]])
        window = weeks[max(0, i - chart.ROLLING + 1):i + 1]
        assert r["rolling"] == pytest.approx(sum(res[w] for w in window) / sum(lab[w] for w in window), abs=1e-4)
