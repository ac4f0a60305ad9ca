"""Class and fix disagreeing: how often the class `none` and how often a resource fix beside it was right.

On the labeled dev split, scored by the held-out model (the shipped model's settings fitted without the dev split,
`IssueClassifier.held_out`, so the figure is not in-sample), each issue gets the model's class (with the rule's
class for mixed GPUs) and its known fixes as they were before classifier/decision.py settled a disagreement (the
rules' tags, then the fix head's). Among the issues whose class is `none` beside a fix whose tag implies a
resource class (taxonomy.toml `implies`), it counts how often the team's class was `none` and how often the
team's fix was that fix, with 95 % Wilson intervals; split by where the fix came from (a rule, or the fix head
alone). classifier/decision.py acts on the outcome (its MEASURED figures).

    .venv/bin/python -m bench.experiments.class_fix          # from the checkout's root; about 10 s
"""

from __future__ import annotations

import json
import math
import sys


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """95 % Wilson score interval of k successes in n, or None for n = 0."""
    if n == 0:
        return None
    p = k / n
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return round((centre - half) / (1 + z * z / n), 3), round((centre + half) / (1 + z * z / n), 3)


def dev_answers() -> tuple[str, list[dict]]:
    """(the scoring model's version, one row per dev-split issue: the team's class and fix, the answer)."""
    from retriage.classifier import device_class
    from retriage.classifier.dataset import load_gold, split
    from retriage.classifier.decision import merged_fixes
    from retriage.classifier.features import views
    from retriage.classifier.model import IssueClassifier
    from retriage.classifier.snapshot_cache import shipped_embedder

    _, dev = split(load_gold())
    model = IssueClassifier.load().held_out()
    v = [views(e.title, e.body) for e in dev]
    preds = model.predict(v, shipped_embedder()(v))
    rows = []
    for e, x, p in zip(dev, v, preds):
        mixed = device_class.mixed_gpu_class(x, e.body, e.engine)
        rule_fixes = x.fixes(e.engine)
        rows.append({"ref": f"{e.repo}#{e.number}", "gold_class": e.re_class, "gold_fix": e.known_fix,
                     "re_class": mixed or p.re_class, "abstained": p.abstained and mixed is None,
                     "rule_fixes": rule_fixes, "known_fixes": merged_fixes(rule_fixes, p.fix_for(e.engine)[0])})
    return model.version, rows


def count(rows: list[dict]) -> dict:
    """The issues whose class is none beside a resource fix: how often the class, how often the fix was right."""
    from retriage.taxonomy import fix_tag_classes

    implied = fix_tag_classes()
    chosen = [(r, next(t for t in r["known_fixes"] if t in implied)) for r in rows
              if r["re_class"] == "none" and any(t in implied for t in r["known_fixes"])]
    n = len(chosen)
    class_right = sum(r["gold_class"] == "none" for r, _ in chosen)
    fix_right = sum(r["gold_fix"] == tag for r, tag in chosen)
    return {"issues": n, "class_none_right": class_right, "class_none_right_95ci": wilson(class_right, n),
            "fix_right": fix_right, "fix_right_95ci": wilson(fix_right, n),
            "from_rules": sum(tag in r["rule_fixes"] for r, tag in chosen),
            "refs": [r["ref"] for r, _ in chosen]}


def main() -> None:
    version, rows = dev_answers()
    out = {"scored_by": version, "dev_issues": len(rows), **count(rows)}
    rules = count([dict(r, known_fixes=r["rule_fixes"]) for r in rows])
    out["rule_fixes_only"] = {k: rules[k] for k in ("issues", "class_none_right", "fix_right")}
    json.dump(out, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
