"""How much a rule match weighs in the verdict, measured on traces that no test side holds.

    .venv/bin/python -m bench.experiments.calibrate [TRACES_DIR]  # default: tests/data/traces

writes taxonomy/rule_precision.toml. A developer tool (run from the checkout's root), not part of the package.

Calibration inputs (`inputs`):
- the train side of the trace benchmark (bench/data/trace_bench.jsonl.gz, bench/traces_cut.py: error blocks cut from
  the labeled vLLM, SGLang and llama.cpp issues created before classifier/splits.FUTURE_CUTOFF), each with its
  issue's label;
- the hand-picked traces (TRACES_DIR: manifest.toml, manifest_added.toml; never the held-out folder), which stay
  regression fixtures, with their `expect_class`; except those cut from an issue on a test side: a TensorRT-LLM
  issue or pull request (that engine is held out entirely) or a labeled issue created on or after the cut-off.
No test-side trace is ever an input (tests/test_verdict.py fails if one is).

Per rule: on how many inputs it was the first match, as `retriage classify` finds it (engine detected from the
log, rules of other engines skipped; environment fixes aside; an input classify refuses measures nothing), and on
how many of them its class (triage/rule_class.py) was the label's. Its precision is (right + 1) / (traces + 2):
measured, smoothed, never 1.0 (triage/verdict.py computes it from the counts).

Then the threshold: the precision from which a rule decides the class instead of the model, the one of
THRESHOLDS that gives the verdict the most right classes over the benchmark's train-side traces (ties: the
higher), each trace judged with its rule's counts taken without it (leave-one-out: a rule is not trusted on a
trace because it was right on that very trace); the model's class from classify's exact path. 1.0 = rules never
decide. Both go into taxonomy/rule_precision.toml, with the counts.
"""

from __future__ import annotations

import json
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from retriage.core.errors import UserError
from retriage.core.output import write_text_atomic
from retriage.core.rules import Match, applies_to, default_rules, match_rules
from retriage.triage import engine as engine_detect
from retriage.triage import logtext
from retriage.triage.rule_class import rule_class
from retriage.triage.verdict import PRECISION_FILE, Precision, decide, smoothed

MANIFESTS = ("manifest.toml", "manifest_added.toml")
ROOT = Path(__file__).resolve().parents[2]  # the checkout's, wherever it runs
TRACES_DIR = ROOT / "tests" / "data" / "traces"
BENCH_FILE = ROOT / "bench" / "data" / "trace_bench.jsonl.gz"
THRESHOLDS = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0)  # 1.0: rules never decide (precision is below 1)
MIN_TRACES = 2
TEST_SIDES = ("test_time", "test_trtllm")


@dataclass
class Input:
    key: str  # the bench trace's html_url, or the hand-picked trace's file name
    source: str  # html_url of the issue it was cut from
    origin: str  # "bench" (train side) or "fixture" (hand-picked)
    expect_class: str
    data: bytes


@dataclass
class Answer:
    file: str
    expect_class: str
    rule_id: str | None  # first matching rule (environment fixes aside)
    rule_class: str | None
    model_class: str | None  # None where the model was not run (hand-picked traces: counts only)
    model_confidence: float
    model_abstained: bool
    text: str
    origin: str = "bench"


def labeled(folder: Path, names=MANIFESTS) -> list[dict]:
    out = []
    for name in names:
        with open(folder / name, "rb") as f:
            out += tomllib.load(f)["trace"]
    return out


def read_bench(path: Path = BENCH_FILE) -> list[dict]:
    import gzip

    with (gzip.open if path.suffix == ".gz" else open)(path, "rt", encoding="utf-8") as f:
        return [json.loads(x) for x in f if x.strip()]


def test_side_sources(bench: list[dict]) -> set[str]:
    """html_url of every issue on a test side: the benchmark's test-side traces and every labeled issue a test
    side would hold (TensorRT-LLM, created on or after the cut-off), whether or not its body held a log."""
    from retriage.classifier.dataset import load_gold
    from retriage.classifier.splits import FUTURE_CUTOFF, HELD_OUT_ENGINE

    out = {r["html_url"] for r in bench if r["split"] in TEST_SIDES}
    out |= {e.html_url for e in load_gold()
            if e.engine == HELD_OUT_ENGINE or (e.created_at and e.created_at >= FUTURE_CUTOFF)}
    return out


def _held_out_engine(url: str) -> bool:
    from retriage.classifier.splits import HELD_OUT_ENGINE
    from retriage.taxonomy import engine_for_repo

    parts = url.split("/")
    e = engine_for_repo("/".join(parts[3:5])) if len(parts) > 4 else None
    return bool(e and e.id == HELD_OUT_ENGINE)


def inputs(folder: Path = TRACES_DIR, bench: list[dict] | None = None, entries: list[dict] | None = None
           ) -> list[Input]:
    """The calibration inputs (module docstring): train-side benchmark traces, then the hand-picked ones that no
    test side holds."""
    bench = read_bench() if bench is None else bench
    entries = labeled(folder) if entries is None else entries
    test = test_side_sources(bench)
    out = [Input(r["html_url"], r["html_url"], "bench", r["re_class"], r["text"].encode("utf-8"))
           for r in bench if r["split"] == "train" and r["html_url"] not in test]
    for e in entries:
        src = e.get("source", "")
        if src in test or e.get("engine") == "trtllm" or _held_out_engine(src):
            continue
        out.append(Input(e["file"], src, "fixture", e["expect_class"], (folder / e["file"]).read_bytes()))
    return out


def first_rule(data: bytes, rules: dict | None = None) -> tuple[str | None, str | None, str]:
    """(first rule id, its class for this text, the text) as `retriage classify` finds them."""
    from retriage.triage import evidence  # the facts the rules may require or exclude, as classify reads them

    log = logtext.parse(data)
    guess = engine_detect.detect(log.text, None)
    found = [m for m in match_rules(log.lines, facts=evidence.facts(log.raw)) if applies_to(m.rule, guess.engine)]
    if not found:
        return None, None, log.raw
    return found[0].rule.id, rule_class(found[0], log.raw)[0], log.raw


def answers(items: list[Input], triage=None, with_model: tuple[str, ...] = ("bench",)) -> list[Answer]:
    """Each input's first rule; and the model's class as classify's exact path gives it, for the inputs whose
    origin is in `with_model` (the threshold is chosen on those)."""
    tr = triage
    out = []
    for it in items:
        try:
            rid, cls, text = first_rule(it.data)
        except UserError:  # classify refuses it (a block of undecodable bytes): it measures nothing
            continue
        model, conf, abstained = None, 0.0, False
        if it.origin in with_model:
            if tr is None:
                from retriage.triage.classify import Triage

                tr = Triage(fast=False, index=False)
            r = tr.run(it.data, similar=0)
            model, conf, abstained = r.model_class["re_class"], r.model_class["re_confidence"], r.abstained
        out.append(Answer(it.key, it.expect_class, rid, cls, model, conf, abstained, text, it.origin))
    return out


def rule_counts(ans: list[Answer]) -> dict[str, tuple[int, int]]:
    counts: dict[str, list[int]] = {}
    for a in ans:
        if a.rule_id:
            c = counts.setdefault(a.rule_id, [0, 0])
            c[0] += a.rule_class == a.expect_class
            c[1] += 1
    return {k: (v[0], v[1]) for k, v in counts.items()}


def verdict_accuracy(ans: list[Answer], threshold: float, counts: dict[str, tuple[int, int]]) -> float:
    """The verdict's class accuracy over `ans`, each answer judged with its rule's counts taken without it."""
    rules = {r.id: r for r in default_rules()[0]}
    right = 0
    for a in ans:
        matches, own = [], {}
        if a.rule_id:
            r, n = counts.get(a.rule_id, (0, 0))
            own = {a.rule_id: (r - (a.rule_class == a.expect_class), n - 1)}
            matches = [Match(rules[a.rule_id], "")]
        v = decide(matches, a.model_class, a.model_confidence, a.model_abstained, a.text,
                   precision=Precision(threshold, MIN_TRACES, {**counts, **own}))
        right += v.re_class == a.expect_class
    return right / len(ans) if ans else 0.0


def calibrate(ans: list[Answer]) -> tuple[Precision, dict[float, float]]:
    """Counts over every answer; the threshold chosen over those the model answered (leave-one-out)."""
    counts = rule_counts(ans)
    judged = [a for a in ans if a.model_class is not None]
    scores = {t: verdict_accuracy(judged, t, counts) for t in THRESHOLDS}
    best = max(THRESHOLDS, key=lambda t: (round(scores[t], 6), t))
    return Precision(best, MIN_TRACES, counts), scores


def write(precision: Precision, scores: dict[float, float], ans: list[Answer], path: Path = PRECISION_FILE) -> None:
    from retriage.classifier.splits import FUTURE_CUTOFF

    judged = [a for a in ans if a.model_class is not None]
    model = sum(a.model_class == a.expect_class for a in judged) / max(len(judged), 1)
    bench = sum(a.origin == "bench" for a in ans)
    fixtures = {}
    for a in ans:
        if a.rule_id and a.origin == "fixture":
            fixtures[a.rule_id] = fixtures.get(a.rule_id, 0) + 1
    lines = [
        "# Each known-fix rule's measured precision: on how many calibration traces it was the first match (as",
        "# `retriage classify` finds it) and on how many of them its class was the label's; precision =",
        "# (right + 1) / (traces + 2), never 1.0 (`fixtures`: how many of the traces are hand-picked ones).",
        f"# Calibration traces: the train side of bench/data/trace_bench.jsonl.gz ({bench} error blocks of labeled",
        f"# vLLM, SGLang and llama.cpp issues created before {FUTURE_CUTOFF}) and {len(ans) - bench} hand-picked "
        "traces of",
        "# tests/data/traces cut from no test-side issue; never a test-side trace. Written by",
        "# `python -m bench.experiments.calibrate`; read by triage/verdict.py: a rule decides the class when its",
        "# precision reaches `threshold` and it was first on at least `min_traces` traces; its precision is then",
        "# the verdict's confidence.",
        f"# Threshold chosen on the {len(judged)} train-side benchmark traces (leave-one-out counts): class accuracy "
        f"of the model alone {model:.3f};",
        "# with the verdict at each threshold: " + ", ".join(f"{t:g}: {s:.3f}" for t, s in scores.items())
        + " (1 = rules never decide).",
        "",
        f"threshold = {precision.threshold}",
        f"min_traces = {precision.min_traces}",
        "",
    ]
    for rid in sorted(precision.counts):
        right, traces = precision.counts[rid]
        lines += [f'[rules."{rid}"]', f"right = {right}", f"traces = {traces}",
                  f"precision = {smoothed(right, traces):.3f}", f"fixtures = {fixtures.get(rid, 0)}", ""]
    write_text_atomic(path, "\n".join(lines))  # whole or not at all


def main(argv: list[str]) -> None:
    folder = Path(argv[0]) if argv else TRACES_DIR
    try:
        entries = labeled(folder)
    except (OSError, tomllib.TOMLDecodeError, KeyError) as e:
        sys.exit(f"calibrate: {folder}: no readable labeled traces ({' and '.join(MANIFESTS)}): "
                 f"{getattr(e, 'strerror', None) or e}")
    try:
        bench = read_bench()
    except (OSError, ValueError) as e:
        sys.exit(f"calibrate: {BENCH_FILE}: no readable trace benchmark (run bench/traces_cut.py): "
                 f"{getattr(e, 'strerror', None) or e}")
    ans = answers(inputs(folder, bench, entries))
    precision, scores = calibrate(ans)
    write(precision, scores, ans)
    low = sorted(rid for rid in precision.counts if not precision.trusted(rid))
    print(f"{len(ans)} calibration traces ({sum(a.origin == 'bench' for a in ans)} train-side benchmark, "
          f"{sum(a.origin == 'fixture' for a in ans)} hand-picked); verdict by threshold "
          + ", ".join(f"{t:g}={s:.3f}" for t, s in scores.items()) + f"; chosen {precision.threshold}; "
          f"below it: {', '.join(low) or 'none'}")


if __name__ == "__main__":
    main(sys.argv[1:])
