"""The one case where a stored issue's class is not the model's alone: a known-fix rule that names the class it
takes on a machine mixing compute capabilities (`mixed_gpu_class` in taxonomy/rules.toml) matches the issue, and
the issue's environment block lists GPUs of different compute capabilities. The guide counts that as RE.3
(heterogeneous GPUs); the model, which reads the rule's usual class among its features, often says `none`
or is unsure. The one decision on an issue (classifier/decision.py: `label` with both tiers of its cascade,
`predict`, `show`, the bot, `eval`) applies it.
`classify` takes the same class through its verdict (triage/rule_class.py).
"""

from __future__ import annotations

from retriage.classifier.model import Prediction
from retriage.core.document import Document
from retriage.core.rules import applies_to
from retriage.taxonomy.environment import mixed_capabilities


def mixed_gpu_class(doc: Document, body: str | None, engine: str | None) -> str | None:
    """The class the issue's first applicable rule names for mixed GPUs, when its environment shows them."""
    first = next((m for m in doc.matches if applies_to(m.rule, engine)), None)
    if first is None or not first.rule.mixed_gpu_class or not mixed_capabilities(body or ""):
        return None
    return first.rule.mixed_gpu_class


def apply(pred: Prediction, cls: str | None) -> Prediction:
    """`pred` with the class `mixed_gpu_class` gave, no longer abstained (its confidence stays the model's figure
    for the class it gave); unchanged when that was None."""
    if cls is not None:
        pred.re_class, pred.abstained = cls, False
    return pred
