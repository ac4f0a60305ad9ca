"""`retriage eval --markdown PATH` writes the tables it computes as Markdown (`make figures` writes
docs/evaluation.md with it): a row for every split and system it scored, with the figures `eval --json` prints in
the same run. Nothing here reads a figure from a file the test did not write."""

from __future__ import annotations

import json
import re

import pytest
from conftest import run_cli

from retriage.classifier import metrics
from retriage.classifier.dataset import Example
from retriage.classifier.evaluation import SYSTEM_NAMES, EvalReport, answered_split, markdown

# | split | system | F1 (lo–hi) | per class | P/R | component | known-fix |
ROW = re.compile(r"^\| ([^|]+?) \| ([^|]+?) \| ([\d.]+) \(([\d.]+)–([\d.]+)\) \| [^|]+ \| ([\d.]+)/([\d.]+) \| "
                 r"([\d.]+) \| [^|]+ \|$", re.M)


def rows_of(text: str) -> dict:
    rows = ROW.findall(text)
    table = {(split, system): rest for split, system, *rest in rows}
    assert len(table) == len(rows), "one row per split and system"
    return table


def want_row(system: dict) -> tuple:
    lo, hi = system["re_macro_f1_95ci"]
    d = system["detection"]
    return (f"{system['re_macro_f1']:.3f}", f"{lo:.2f}", f"{hi:.2f}", f"{d['precision']:.2f}",
            f"{d['recall']:.2f}", f"{system['component_macro_f1']:.3f}")


def check_rows(report: dict, text: str) -> None:
    splits = ([report["summary"]] if report["summary"] else []) + report["generalisation"]
    table = rows_of(text)
    assert len(table) == sum(len(s["systems"]) for s in splits)
    for s in splits:
        for key, system in s["systems"].items():
            assert tuple(table[(s["split"], SYSTEM_NAMES[key])]) == want_row(system), (s["split"], key)
    assert f"`{report['model_version']}`" in text


# ---- the renderer, in process --------------------------------------------------------------------------------------
def _example(i: int, re_class: str, repo: str = "vllm-project/vllm") -> Example:
    return Example(repo, i, f"https://github.com/{repo}/issues/{i}", f"title | {i}", "body", re_class, "scheduler",
                   "oom_four_step" if re_class == "RE.1" else "none", source="real")


def small_report() -> EvalReport:
    gold = [_example(i, c) for i, c in enumerate(["RE.1", "RE.2", "none", "none", "RE.3", "RE.1"])]
    gold += [_example(10 + i, c, "sgl-project/sglang") for i, c in enumerate(["RE.4", "none", "RE.2"])]
    model = ["RE.1", "RE.3", "none", "RE.1", "RE.3", "none", "RE.4", "none", "none"]
    answers = {"re_class": model, "component": ["scheduler"] * 6 + ["other"] * 3,
               "abstained": [False, True, False, False, False, False, False, True, False],
               "fixes": [["oom_four_step"], [], [], [], [], ["oom_four_step"], [], [], []]}
    predicted = {"model": answers, "majority": {"re_class": ["none"] * 9, "component": ["scheduler"] * 9}}
    report = EvalReport("a gold file", len(gold), 40, "m-aaaa", 0.78, scored_by="m-bbbb")
    for target in ("re_class", "component"):
        labels = metrics.labels_for(target)
        y = [getattr(e, target) for e in gold]
        report.scores[target] = {k: metrics.score(y, a[target], labels) for k, a in predicted.items()}
    report.summary = answered_split("dev", "the newest issues", 40, gold, answers, predicted)
    report.generalisation.append(answered_split("new_engine:sglang", "no | sglang issue", 30, gold[6:],
                                                {k: v[6:] for k, v in answers.items()},
                                                {k: {t: v[6:] for t, v in a.items()} for k, a in predicted.items()}))
    return report


def test_markdown_has_a_row_per_split_and_system_with_the_reports_figures():
    report = small_report()
    text = markdown(report)
    check_rows(json.loads(json.dumps(report.to_dict())), text)
    assert "`m-bbbb`" in text, "the held-out fit that scored the dev split is named"
    lines = text.splitlines()
    assert lines[0] == "# Evaluation"
    # every table row has as many cells as its header: a `|` inside a title or description is escaped
    blocks = [b.strip("\n").split("\n") for b in re.findall(r"(?:^\|.*\|\n)+", text + "\n", re.M)]
    assert len(blocks) >= 3
    for header, *rest in blocks:
        width = len(re.split(r"(?<!\\)\|", header))
        assert all(len(re.split(r"(?<!\\)\|", row)) == width for row in rest), header
    assert "no \\| sglang issue" in text


# ---- the command -----------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_bad_markdown_path_fails_before_any_work(tmp_path):
    proc = run_cli("eval", "--dev-only", "--markdown", str(tmp_path), timeout=60)
    assert proc.returncode == 1 and "is a folder" in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr
    proc = run_cli("eval", "--dev-only", "--json", "--markdown", "-", timeout=60)
    assert proc.returncode == 2 and proc.stdout == "" and len(proc.stderr.splitlines()) == 1, proc.stderr


@pytest.mark.slow
def test_eval_markdown_holds_the_figures_eval_json_prints_in_the_same_run(tmp_path):
    """Every split `eval` scored and every system, as `--json` says in the same run. The dev split only: the
    generalisation splits refit the model (minutes on a cold cache), and the rendering of every split is checked
    in-process above."""
    out = tmp_path / "evaluation.md"
    out.write_text("old\n")
    proc = run_cli("eval", "--dev-only", "--json", "--markdown", str(out), timeout=1800)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["summary"]["split"] == "dev"
    text = out.read_text()
    check_rows(report, text)
    assert f"`{report['scored_by']}`" in text
    assert not list(tmp_path.glob(".evaluation.md.*")), "the temporary file was renamed over the target"
