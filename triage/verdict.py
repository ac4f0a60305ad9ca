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


def load_precision(path: Path) -> Precision:
    with open(path, "rb") as f:
        d = tomllib.load(f)
    counts = {rid: (int(v["right"]), int(v["traces"])) for rid, v in d.get("rules", {}).items()}
    return Precision(float(d["threshold"]), int(d["min_traces"]), counts)


@dataclass(frozen=True)
class Verdict:
    re_class: str
    confidence: float  # the model's probability, or the rule's measured precision when the rule decided (< 1)
    source: str  # "model" or "rule"
    reason: str | None  # one line when the rule and the model differ or the class was refined
    abstained: bool
    rule: dict | None = None  # the deciding rule: {"id", "right", "traces"}
    worth_checking: bool = False  # a rule matched below the bar: its fix is shown as worth checking


def decide(matches: list[Match], model_class: str, model_confidence: float, model_abstained: bool, text: str,
           mixed_gpus: str | None = None, precision: Precision | None = None) -> Verdict:
    precision = precision or default_precision()
    reason, below = None, False
    if matches:
        m = matches[0]
        cls, devices = rule_class(m, text)
        right, n = precision.of(m.rule.id)
        p = _shown(precision.precision(m.rule.id))
        model = f"the model alone said {model_class} ({model_confidence:.2f})"
        if precision.trusted(m.rule.id):
            basis = (f"rule {m.rule.id} (precision {p:.2f}: right on {right} of {n} labeled traces, at or above "
                     f"the {precision.threshold:.2f} bar)")
            if devices:
                reason = (f"{cls}: {basis} with {devices}, where the guide counts the failure as multi-device"
                          + ("" if cls == model_class else f"; {model}"))
            elif cls != model_class:
                reason = f"{cls} from {basis}; {model}"
            return Verdict(cls, p, "rule", reason, False, {"id": m.rule.id, "right": right, "traces": n})
        below = True
        if cls != model_class:
            basis = (f"measured on {n} labeled trace{'s' if n != 1 else ''} only" if n < precision.min_traces
                     else f"right on {right} of {n} labeled traces, precision {p:.2f}, below the "
                          f"{precision.threshold:.2f} bar" if n else "not yet measured on labeled traces")
            reason = (f"rule {m.rule.id} suggests {cls}, but it was {basis}: the model's "
                      f"{model_class} ({model_confidence:.2f}) stands; the rule's fix is worth checking")
    if mixed_gpus and model_class != "RE.3":
        extra = f"the machine mixes GPUs ({mixed_gpus}): if the failure happens only across them, it is RE.3"
        reason = f"{reason}; {extra}" if reason else extra
    return Verdict(model_class, model_confidence, "model", reason, model_abstained, worth_checking=below)
