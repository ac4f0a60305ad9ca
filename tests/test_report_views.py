"""The report's views on the real DuckDB file of tests/test_report.py (the bundled snapshot with predictions
written in SQL): the partial week in JSON and the change, the HTML page and its issue links, one palette for
every chart, the 12-week default, and the component shares beside the published ones."""

from __future__ import annotations

import json
import re
from datetime import date, datetime, timedelta

import pytest

from conftest import run_cli
from retriage import taxonomy
from retriage.report import chart, palette
from retriage.report.components import component_shares, reference_shares
from retriage.report.weekly import weekly_report
from test_report import MODEL, con, db  # noqa: F401  (the module's fixtures: one database for both files)

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
    table = _cli(db, env={"COLUMNS": "160"}).stdout
    rows = [line.split()[0] for line in table.splitlines() if re.match(r"\s*\d{4}-\d\d-\d\d", line)]
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
    assert set(taxonomy.resource_class_ids()) | {"none"} <= set(by_class)
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
    table = _cli(db, "--components", "--engine", "vllm", env={"COLUMNS": "150"}).stdout
    assert "21%" in table and "2506.09713" in table and "engine_setup" in table
