"""How much a rule match weighs in the verdict, measured on the labeled traces.

    .venv/bin/python -m bench.experiments.calibrate [TRACES_DIR]  # default: tests/data/traces

writes taxonomy/rule_precision.toml. A developer tool (run from the checkout's root), not part of the package:
the labeled traces live with the tests.

For every labeled trace (manifest.toml, manifest_added.toml; never the held-out folder) the first matching rule's
class (triage/rule_class.py) is compared with the trace's `expect_class`: per rule, how many traces it was
first on and how many of them it got right. Then the threshold: the precision from which a rule overrides the
model is the one of 0.5 ... 1.0 (or never) that gives the most right classes over the same traces (ties: the
higher threshold). Both go into taxonomy/rule_precision.toml, which triage/verdict.py reads.
"""

from __future__ import annotations

import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from retriage.core.output import write_text_atomic
from retriage.core.rules import Match, default_rules
from retriage.triage import logtext
from retriage.triage.rule_class import rule_class
from retriage.triage.verdict import PRECISION_FILE, Precision, decide

MANIFESTS = ("manifest.toml", "manifest_added.toml")
TRACES_DIR = Path(__file__).resolve().parents[2] / "tests" / "data" / "traces"  # the checkout's, wherever it runs
THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.01)  # 1.01: rules never override
MIN_TRACES = 2


@dataclass
class Answer:
    file: str
    expect_class: str
    rule_id: str | None  # first matching rule (environment fixes aside)
    rule_class: str | None
    model_class: str
    model_confidence: float
    model_abstained: bool
    text: str


def labeled(folder: Path, names=MANIFESTS) -> list[dict]:
    out = []
    for name in names:
        with open(folder / name, "rb") as f:
            out += tomllib.load(f)["trace"]
    return out


def answers(folder: Path, entries: list[dict], triage=None) -> list[Answer]:
    """The model's class and the first rule of every trace, as `retriage classify` computes them."""
    from retriage.triage.classify import Triage

    tr = triage or Triage()
    rules = {r.id: r for r in default_rules()[0]}
    out = []
    for e in entries:
        data = (folder / e["file"]).read_bytes()
        r = tr.run(data, engine=e["engine"] or None, similar=0)
        first = next((f["id"] for f in r.fixes if not f["line"].startswith("environment: ")), None)
        text = logtext.parse(data).raw
        cls = rule_class(Match(rules[first], ""), text)[0] if first else None
        out.append(Answer(e["file"], e["expect_class"], first, cls, r.model_class["re_class"],
                          r.model_class["re_confidence"], r.abstained, text))
    return out


def rule_counts(ans: list[Answer]) -> dict[str, tuple[int, int]]:
    counts: dict[str, list[int]] = {}
    for a in ans:
        if a.rule_id:
            c = counts.setdefault(a.rule_id, [0, 0])
            c[0] += a.rule_class == a.expect_class
            c[1] += 1
    return {k: (v[0], v[1]) for k, v in counts.items()}


def verdict_accuracy(ans: list[Answer], precision: Precision) -> float:
    rules = {r.id: r for r in default_rules()[0]}
    right = 0
    for a in ans:
        matches = [Match(rules[a.rule_id], "")] if a.rule_id else []
        v = decide(matches, a.model_class, a.model_confidence, a.model_abstained, a.text, precision=precision)
        right += v.re_class == a.expect_class
    return right / len(ans)


def calibrate(ans: list[Answer]) -> tuple[Precision, dict[float, float]]:
    counts = rule_counts(ans)
    scores = {t: verdict_accuracy(ans, Precision(t, MIN_TRACES, counts)) for t in THRESHOLDS}
    best = max(THRESHOLDS, key=lambda t: (round(scores[t], 6), t))
    return Precision(best, MIN_TRACES, counts), scores


def write(precision: Precision, scores: dict[float, float], model_accuracy: float, n: int,
          path: Path = PRECISION_FILE) -> None:
    lines = [
        "# How often each known-fix rule's class was right when it was the first match on a labeled trace",
        "# (tests/data/traces manifests, expect_class), and the precision from which a rule decides the class",
        "# instead of the model. Written by `python -m bench.experiments.calibrate`; read by triage/verdict.py.",
        f"# {n} labeled traces; class accuracy of the model alone {model_accuracy:.3f}; with the verdict at each",
        "# threshold: " + ", ".join(f"{t:g}: {s:.3f}" for t, s in scores.items()) + " (1.01 = rules never decide).",
        "",
        f"threshold = {precision.threshold}",
        f"min_traces = {precision.min_traces}",
        "",
    ]
    for rid in sorted(precision.counts):
        right, traces = precision.counts[rid]
        lines += [f'[rules."{rid}"]', f"right = {right}", f"traces = {traces}", ""]
    write_text_atomic(path, "\n".join(lines))  # whole or not at all


def main(argv: list[str]) -> None:
    folder = Path(argv[0]) if argv else TRACES_DIR
    try:
        entries = labeled(folder)
    except (OSError, tomllib.TOMLDecodeError, KeyError) as e:
        sys.exit(f"calibrate: {folder}: no readable labeled traces ({' and '.join(MANIFESTS)}): "
                 f"{getattr(e, 'strerror', None) or e}")
    ans = answers(folder, entries)
    precision, scores = calibrate(ans)
    model_accuracy = sum(a.model_class == a.expect_class for a in ans) / len(ans)
    write(precision, scores, model_accuracy, len(ans))
    print(f"{len(ans)} labeled traces: model alone {model_accuracy:.3f}; verdict by threshold "
          + ", ".join(f"{t:g}={s:.3f}" for t, s in scores.items()) + f"; chosen {precision.threshold}")


if __name__ == "__main__":
    main(sys.argv[1:])
