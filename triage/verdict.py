"""One class for a pasted log: the known-fix rule's or the model's, and one line saying why when they differ.

A rule whose class was right on the labeled traces often enough (taxonomy/rule_precision.toml: at least
`min_traces` traces with the rule as the first match, precision at least `threshold`, both chosen by
bench/experiments/calibrate.py) decides the class; otherwise the model does. The model reads the rule
matches as features too, so a new rule needs no retraining: it carries its class, and this layer weighs it by
its measured precision. A rule that says which class it takes when several devices are at work
(`multi_device_class`, e.g. a /dev/shm shortage under tensor parallel) takes it when the log shows them; one
that names the class on a machine mixing compute capabilities (`mixed_gpu_class`) takes it when the
environment block lists them (triage/rule_class.py).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from retriage.core.rules import Match
from retriage.taxonomy import HERE as TAXONOMY_DIR
from retriage.triage.rule_class import rule_class

PRECISION_FILE = TAXONOMY_DIR / "rule_precision.toml"


@dataclass(frozen=True)
class Precision:
    threshold: float
    min_traces: int
    counts: dict  # rule id -> (right, traces)

    def of(self, rule_id: str) -> tuple[int, int]:
        return self.counts.get(rule_id, (0, 0))

    def trusted(self, rule_id: str) -> bool:
        right, n = self.of(rule_id)
        return n >= self.min_traces and right / n >= self.threshold


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
    confidence: float  # the model's probability, or the rule's measured precision when the rule decided
    source: str  # "model" or "rule"
    reason: str | None  # one line when the rule and the model differ or the class was refined
    abstained: bool
    rule: dict | None = None  # the deciding rule: {"id", "right", "traces"}


def decide(matches: list[Match], model_class: str, model_confidence: float, model_abstained: bool, text: str,
           mixed_gpus: str | None = None, precision: Precision | None = None) -> Verdict:
    precision = precision or default_precision()
    reason = None
    if matches:
        m = matches[0]
        cls, devices = rule_class(m, text)
        right, n = precision.of(m.rule.id)
        model = f"the model alone said {model_class} ({model_confidence:.2f})"
        if precision.trusted(m.rule.id):
            basis = f"rule {m.rule.id} (right on {right} of {n} labeled traces)"
            if devices:
                reason = (f"{cls}: {basis} with {devices}, where the guide counts the failure as multi-device"
                          + ("" if cls == model_class else f"; {model}"))
            elif cls != model_class:
                reason = f"{cls} from {basis}; {model}"
            return Verdict(cls, round(right / n, 2), "rule", reason, False,
                           {"id": m.rule.id, "right": right, "traces": n})
        if cls != model_class:
            basis = (f"measured on {n} labeled trace{'s' if n != 1 else ''} only" if n < precision.min_traces
                     else f"right on only {right} of {n} labeled traces" if n else "not yet measured on labeled traces")
            reason = (f"rule {m.rule.id} suggests {cls}, but it was {basis}: the model's "
                      f"{model_class} ({model_confidence:.2f}) stands")
    if mixed_gpus and model_class != "RE.3":
        extra = f"the machine mixes GPUs ({mixed_gpus}): if the failure happens only across them, it is RE.3"
        reason = f"{reason}; {extra}" if reason else extra
    return Verdict(model_class, model_confidence, "model", reason, model_abstained)
