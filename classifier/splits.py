"""The splits that measure whether the classifier generalises, beside the dev split (classifier/dataset.py).

- future: train on issues created before a cut-off date, score on those created on or after it (the corpus
  ends in July 2025; the issues users mine today come after it);
- new engine: leave one engine's issues out of training and score on them (TensorRT-LLM by default).

Issues without a known creation date take part in neither side of the future split. Pure functions: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from retriage.classifier.dataset import Example

FUTURE_CUTOFF = "2025-08-01"
HELD_OUT_ENGINE = "trtllm"


@dataclass
class Split:
    name: str
    description: str
    train: list[Example]
    test: list[Example]


def future(examples: list[Example], cutoff: str = FUTURE_CUTOFF) -> Split:
    dated = [e for e in examples if e.created_at]
    return Split("future", f"trained on issues created before {cutoff}, scored on those created since",
                 [e for e in dated if e.created_at < cutoff], [e for e in dated if e.created_at >= cutoff])


def new_engine(examples: list[Example], engine: str = HELD_OUT_ENGINE) -> Split:
    return Split(f"new_engine:{engine}", f"trained without any {engine} issue, scored on the {engine} issues",
                 [e for e in examples if e.engine != engine], [e for e in examples if e.engine == engine])


def generalisation_splits(examples: list[Example]) -> list[Split]:
    return [future(examples), new_engine(examples)]
