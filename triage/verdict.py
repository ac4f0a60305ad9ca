"""One class for a pasted log: the known-fix rule's or the model's, and one line saying why when they differ.

Each rule's precision is measured (taxonomy/rule_precision.toml, written by bench/experiments/calibrate.py from
traces that no test side holds: the trace benchmark's train side and the hand-picked traces): on how many
traces it was the first match and how often its class was the label's, smoothed as (right + 1) / (traces + 2),
so never 1.0. A rule decides the class when it was first on at least `min_traces` traces and its precision
reaches `threshold` (chosen on the benchmark's train side); the verdict's confidence is then that precision.
Below the bar the model's class stands, and the rule's fix is only worth checking; when the two classes differ
the one-line reason says which one the answer follows and why. The model reads the rule matches as features too,
so a new rule needs no retraining: it carries its class, and this layer weighs it by its measured precision. A
rule that says which class it takes when several devices are at work (`multi_device_class`, e.g. a /dev/shm
shortage under tensor parallel) takes it when the log shows them; one that names the class on a machine mixing
compute capabilities (`mixed_gpu_class`) takes it when the environment block lists them (triage/rule_class.py).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from retriage.core.rules import Match
from retriage.taxonomy import HERE as TAXONOMY_DIR
from retriage.triage.rule_class import rule_class

PRECISION_FILE = TAXONOMY_DIR / "rule_precision.toml"
EVIDENCE_PRECISION_FILE = TAXONOMY_DIR / "evidence_precision.toml"


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % Wilson interval of k right out of n."""
    if n == 0:
        return 0.0, 1.0
    p, d = k / n, 1 + z * z / n
    mid, half = (p + z * z / (2 * n)) / d, z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, mid - half), min(1.0, mid + half)


def smoothed(right: int, traces: int) -> float:
    """A rule's measured precision: (right + 1) / (traces + 2), 0.5 when unmeasured, never 1.0."""
    return (right + 1) / (traces + 2)


@dataclass(frozen=True)
class Precision:
    threshold: float
    min_traces: int
    counts: dict  # rule id -> (right, traces)

    def of(self, rule_id: str) -> tuple[int, int]:
        return self.counts.get(rule_id, (0, 0))

    def precision(self, rule_id: str) -> float:
        return smoothed(*self.of(rule_id))

    def trusted(self, rule_id: str) -> bool:
        return self.of(rule_id)[1] >= self.min_traces and self.precision(rule_id) >= self.threshold


def _shown(p: float) -> float:
    """A precision as the answer shows it: two decimals, rounded down (0.996 is not 1.00)."""
    return math.floor(p * 100 + 1e-9) / 100


@lru_cache(maxsize=1)
def default_precision() -> Precision:
    return load_precision(PRECISION_FILE)


@lru_cache(maxsize=1)
def default_evidence_precision() -> dict[str, tuple[int, int]]:
    """Fact name -> (right, traces) on the train side (taxonomy/evidence_precision.toml); empty without it."""
    if not EVIDENCE_PRECISION_FILE.exists():
        return {}
    with open(EVIDENCE_PRECISION_FILE, "rb") as f:
        d = tomllib.load(f)
    return {k: (int(v["right"]), int(v["traces"])) for k, v in d.get("facts", {}).items()}


def _measured(right: int, n: int, p: float) -> str:
    lo, hi = wilson(right, n)
    return f"precision {p:.2f}: right on {right} of {n} labeled traces, 95 % interval {lo:.2f}-{hi:.2f}"


def load_precision(path: Path) -> Precision:
    with open(path, "rb") as f:
        d = tomllib.load(f)
    counts = {rid: (int(v["right"]), int(v["traces"])) for rid, v in d.get("rules", {}).items()}
    return Precision(float(d["threshold"]), int(d["min_traces"]), counts)


@dataclass(frozen=True)
class Verdict:
    re_class: str
    confidence: float  # the model's probability, or the rule's measured precision when the rule decided (< 1)
    source: str  # "model", "rule" or "evidence" (a fact parsed from the log, triage/evidence.py)
    reason: str | None  # one line when the rule and the model differ or the class was refined
    abstained: bool
    rule: dict | None = None  # the deciding rule or fact: {"id", "kind", "right", "traces"} (+ "evidence")
    worth_checking: bool = False  # a rule matched below the bar: its fix is shown as worth checking


def _fact_candidates(facts: dict[str, str] | None, precision: Precision, counts: dict[str, tuple[int, int]],
                     signals: dict[str, str]) -> list[tuple[float, str, str, int, int, str]]:
    """(precision, class, fact, right, traces, phrase) of the shown facts that reach the bar, best first."""
    out = []
    for name, phrase in (facts or {}).items():
        cls = signals.get(name)
        right, n = counts.get(name, (0, 0))
        p = smoothed(right, n)
        if cls and n >= precision.min_traces and p >= precision.threshold:
            out.append((p, cls, name, right, n, phrase))
    return sorted(out, key=lambda c: -c[0])


def decide(matches: list[Match], model_class: str, model_confidence: float, model_abstained: bool, text: str,
           mixed_gpus: str | None = None, precision: Precision | None = None, facts: dict[str, str] | None = None,
           evidence_counts: dict[str, tuple[int, int]] | None = None, signals: dict[str, str] | None = None
           ) -> Verdict:
    """`facts`: fact name -> phrase (triage/evidence.py); None (or empty) leaves the evidence out of the verdict.
    `evidence_counts` and `signals` default to the shipped files."""
    precision = precision or default_precision()
    if facts:
        from retriage.triage import evidence

        signals = evidence.signals() if signals is None else signals
        evidence_counts = default_evidence_precision() if evidence_counts is None else evidence_counts
        best_fact = next(iter(_fact_candidates(facts, precision, evidence_counts, signals)), None)
    else:
        best_fact = None
    reason, below = None, False
    model = f"the model alone said {model_class} ({model_confidence:.2f})"
    rule_p = None
    if matches:
        m = matches[0]
        cls, devices = rule_class(m, text)
        right, n = precision.of(m.rule.id)
        p = _shown(precision.precision(m.rule.id))
        if precision.trusted(m.rule.id):
            rule_p = precision.precision(m.rule.id)
    if best_fact is not None and (rule_p is None or best_fact[0] > rule_p):
        fp, fcls, name, fright, fn, phrase = best_fact
        shown = _shown(fp)
        basis = (f"the log shows {phrase} (evidence {name}, {_measured(fright, fn, shown)}, at or above the "
                 f"{precision.threshold:.2f} bar)")
        if fcls != model_class:
            reason = f"{fcls} from {basis}; {model}"
        if matches and cls != fcls:
            extra = f"rule {matches[0].rule.id} suggests {cls}, with a lower measured precision"
            reason = f"{reason}; {extra}" if reason else f"{fcls} from {basis}; {extra}"
        return Verdict(fcls, shown, "evidence", reason, False,
                       {"id": name, "kind": "evidence", "right": fright, "traces": fn, "evidence": phrase})
    if matches:
        if rule_p is not None:
            basis = f"rule {m.rule.id} ({_measured(right, n, p)}, at or above the {precision.threshold:.2f} bar)"
            if devices:
                reason = (f"{cls}: {basis} with {devices}, where the guide counts the failure as multi-device"
                          + ("" if cls == model_class else f"; {model}"))
            elif cls != model_class:
                reason = f"{cls} from {basis}; {model}"
            return Verdict(cls, p, "rule", reason, False, {"id": m.rule.id, "kind": "rule", "right": right,
                                                          "traces": n})
        below = True
        if cls != model_class:
            basis = (f"measured on {n} labeled trace{'s' if n != 1 else ''} only" if n < precision.min_traces
                     else f"right on {right} of {n} labeled traces, precision {p:.2f}, below the "
                          f"{precision.threshold:.2f} bar" if n else "not yet measured on labeled traces")
            reason = (f"rule {m.rule.id} suggests {cls}, but it was {basis}: the model's "
                      f"{model_class} ({model_confidence:.2f}) stands; the rule's fix is worth checking")
    if facts and reason is None:  # a shown fact that points elsewhere but is not measured well enough: say so
        counts = evidence_counts or {}
        other = sorted((smoothed(*counts.get(k, (0, 0))), k) for k in facts
                       if signals.get(k, model_class) != model_class)
        if other:
            _, k = other[-1]
            right, n = counts.get(k, (0, 0))
            measured = (f"right on {right} of {n} labeled traces, precision {_shown(smoothed(right, n)):.2f}, below "
                        f"the {precision.threshold:.2f} bar" if n >= precision.min_traces else
                        f"measured on {n} labeled trace{'s' if n != 1 else ''} only")
            reason = (f"the log shows {facts[k]}, which points to {signals[k]}, but that evidence was {measured}: the "
                      f"model's {model_class} ({model_confidence:.2f}) stands; worth checking")
    if mixed_gpus and model_class != "RE.3":
        extra = f"the machine mixes GPUs ({mixed_gpus}): if the failure happens only across them, it is RE.3"
        reason = f"{reason}; {extra}" if reason else extra
    return Verdict(model_class, model_confidence, "model", reason, model_abstained, worth_checking=below)
