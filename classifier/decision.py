"""The one decision on an issue (its title and body, not a pasted log): the model's answer -> the class, whether it
is unsure, the known fixes and how the answer was made. `label` (both tiers of its cascade) stores it, `predict`
prints it, `show` and `list` read it back and the bot's `comment` says it: one issue, one answer. A pasted log
gets its class from `classify`'s verdict instead (triage/verdict.py); `eval` scores these decisions.

Three steps, in this order:

1. the class and abstention are the model's, unless a known-fix rule names the class for mixed GPUs and the issue's
   environment block lists them (classifier/device_class.py);
2. the known fixes: the matching rules' tags (priority order), then the fix head's tag in the issue's engine's
   terms (a prediction of the fast path has no fix-head part: its rules' tags only);
3. the class and the fixes agree. A fix whose tag implies a resource class (taxonomy.toml `implies`: out-of-memory
   steps, the KV budget, offloading, NCCL, shared memory) beside the class `none` is a disagreement. Measured on
   the labeled dev split with the held-out model (`bench/experiments/class_fix.py`): of the 22 dev issues where
   the class was none beside such a fix (all 22 the fix head's), the team's class was none for 19 (86 %, 95 %
   Wilson interval 67-95 %) and the team's fix was that fix for 1 (5 %, 1-22 %). So the class stands: the fix
   head's resource tag is left out beside none, and a rule's (a line of the issue matched it; no such case on
   the dev split) is kept as worth checking. Either way `note` says why in one line.

`made_by` records the path: "model m-… · MiniLM" (the three views embedded), "model m-… · fast path (static
MiniLM)" (the cascade's open gate), then "+ rule mixed-GPU class" where that rule's class stands, and "+ fix …"
where step 3 left a fix out or marked it worth checking.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from retriage.taxonomy import fix_tag_classes

if TYPE_CHECKING:  # light to import: `show` and `list` read the decision's notes without loading the model
    from retriage.classifier.model import Prediction
    from retriage.core.document import Document

FULL = "MiniLM"  # the full model: the three views embedded with MiniLM
FAST = "fast path (static MiniLM)"  # the fast head of the cascade (no fix-head tag)
# The measurement behind step 3 (dev split, held-out model): issues with the class none beside a resource fix, how
# often the team's class was none, how often the team's fix was that fix.
MEASURED = {"issues": 22, "class_none_right": 19, "fix_right": 1}


@dataclass
class Decision:
    re_class: str  # the best guess, also when abstained
    abstained: bool
    known_fixes: list[str]
    made_by: str
    note: str | None = None  # one line: why a resource fix is missing or to be checked beside `none`
    head_fix: str = "none"  # the fix head's tag among known_fixes ("none": it named none, or it was left out)
    head_fix_confidence: float = 0.0
    worth_checking: list[str] = field(default_factory=list)  # resource fixes kept beside `none` (a rule's)
    left_out: list[str] = field(default_factory=list)  # resource fixes left out beside `none` (the fix head's)


def prediction_row(repo: str, number: int, prediction: Prediction, d: Decision, model_version: str | None,
                   labeled_at) -> tuple:
    """The stored prediction: a row of the predictions table in db.writes.PREDICTION_COLUMNS order."""
    return (repo, number, d.re_class, prediction.component, prediction.re_confidence, prediction.component_confidence,
            d.abstained, d.known_fixes, model_version, labeled_at, d.made_by, d.note)


def merged_fixes(rule_fixes: list[str], head_tag: str) -> list[str]:
    """The rules' tags in priority order, then the fix head's tag (unless "none" or already there)."""
    tags = list(rule_fixes)
    if head_tag != "none" and head_tag not in tags:
        tags.append(head_tag)
    return tags


def _classes(tag: str) -> str:
    return "/".join(fix_tag_classes()[tag])


def decide(prediction: Prediction, rule_fixes: list[str], engine: str | None, mixed_gpu_class: str | None = None,
           model_version: str | None = None, path: str = FULL) -> Decision:
    """The decision from the model's prediction, the matching rules' tags for the issue's engine (`Document.fixes`)
    and the class a rule names for the issue's mixed GPUs (`device_class.mixed_gpu_class`). `prediction` is not
    changed."""
    made_by = [f"model {model_version or '-'} · {path}"]
    re_class, abstained = prediction.re_class, prediction.abstained
    if mixed_gpu_class is not None:  # the rule's class stands (recorded also where the model said the same)
        re_class, abstained = mixed_gpu_class, False
        made_by.append("rule mixed-GPU class")
    head, confidence = prediction.fix_for(engine)
    notes, checking, left_out = [], [], []
    if re_class == "none":
        implied = fix_tag_classes()
        if head in implied and head not in rule_fixes:
            left_out.append(head)
            notes.append(f"fix {head} (implies {_classes(head)}) left out beside the class none: there the fix "
                         f"head's resource fix matched the team's fix on {MEASURED['fix_right']} of "
                         f"{MEASURED['issues']} dev issues, the class on {MEASURED['class_none_right']}")
            made_by.append(f"fix {head} left out beside none")
            head, confidence = "none", 0.0
        checking = [t for t in rule_fixes if t in implied]
        if checking:
            notes.append("worth checking: " + ", ".join(f"rule fix {t} implies {_classes(t)}" for t in checking)
                         + f", the model says none ({prediction.re_confidence:.2f})")
            made_by.append(f"fix {', '.join(checking)} worth checking beside none")
    return Decision(re_class, abstained, merged_fixes(rule_fixes, head), " + ".join(made_by),
                    "; ".join(notes) or None, head, confidence, checking, left_out)


def decide_issue(doc: Document, body: str | None, engine: str | None, prediction: Prediction,
                 model_version: str | None = None, path: str = FULL) -> Decision:
    """`decide` for an issue's document (its rule matches) and body (its environment block)."""
    from retriage.classifier import device_class

    return decide(prediction, doc.fixes(engine), engine, device_class.mixed_gpu_class(doc, body, engine),
                  model_version, path)


def unchecked_note(re_class: str, known_fixes: list[str] | None) -> str | None:
    """For a stored prediction made before the decision recorded its note (no `made_by`): one line for each
    resource fix it shows beside the class none."""
    implied = fix_tag_classes()
    tags = [t for t in known_fixes or [] if t in implied]
    if re_class != "none" or not tags:
        return None
    return ("worth checking: " + ", ".join(f"fix {t} implies {_classes(t)}" for t in tags)
            + ", the class is none (labeled before this check; beside none such a fix was rarely the team's)")
