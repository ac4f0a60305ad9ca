"""What the bot's thresholds buy, measured on the labeled dev split (`bench/bot_thresholds`, docs/bot.md).

The shipped model's held-out fit (`IssueClassifier.held_out`: the same settings, fitted without the dev split)
predicts the dev split (issues it never saw; vectors from the package's embedding
cache). For a threshold t, a figure is (right, said): how many of the statements the bot would make are right
by the team's label, and how many it would make.

  class      a resource class, not abstained, confidence >= t: the label has that class;
  component  beside a class stated at the configured class threshold, component confidence >= t: same component;
  rules      the first known-fix tag of a matching rule for the issue's engine: the label's fix (no threshold);
  fix_head   the model's fix tag where no rule matched, confidence >= t: the label's fix;
  similar    for issues labeled with a resource class, the nearest training issue by cosine of the first view
             (as `show` and the bot list them) at >= t: it has the same RE class.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retriage.bot.config import BotConfig, load_config


@dataclass
class DevFigures:
    n: int
    resource: int
    model_version: str | None
    class_right: dict      # t -> (right, said)
    component_right: dict
    rules: tuple
    fix_head_right: dict
    similar_right: dict
    class_threshold: float


def _unit(m: np.ndarray) -> np.ndarray:
    return m / np.linalg.norm(m, axis=1, keepdims=True).clip(1e-9)


def dev_figures(class_t, component_t, fix_t, similar_t, cfg: BotConfig | None = None) -> DevFigures:
    from retriage.classifier.dataset import load_gold, split
    from retriage.classifier.evaluation import cached_embedder
    from retriage.classifier.features import views
    from retriage.classifier.model import IssueClassifier

    cfg = cfg or load_config()
    model = IssueClassifier.load().held_out()  # the fit that never saw the dev split
    embed = cached_embedder(None)
    train, dev = split(load_gold())
    dv = [views(e.title, e.body) for e in dev]
    demb = embed(dv)
    preds = model.predict(dv, demb)
    pairs = list(zip(dev, dv, preds))

    def count(items, right) -> tuple[int, int]:
        items = list(items)
        return sum(1 for x in items if right(x)), len(items)

    resource_said = [(e, x, p) for e, x, p in pairs if p.re_class != "none" and not p.abstained]
    classes = {t: count((q for q in resource_said if q[2].re_confidence >= t), lambda q: q[0].re_class == q[2].re_class)
               for t in class_t}
    stated = [q for q in resource_said if q[2].re_confidence >= cfg.class_confidence]
    comps = {t: count((q for q in stated if q[2].component_confidence >= t), lambda q: q[0].component == q[2].component)
             for t in component_t}
    rules = count(((e, x.fixes(e.engine)[0]) for e, x, _ in pairs if x.fixes(e.engine)), lambda q: q[0].known_fix == q[1])
    said = [(e, *p.fix_for(e.engine)) for e, x, p in pairs if not x.fixes(e.engine)]  # (issue, tag, confidence)
    heads = {t: count((q for q in said if q[1] != "none" and q[2] >= t), lambda q: q[0].known_fix == q[1])
             for t in fix_t}
    temb = _unit(embed([views(e.title, e.body) for e in train])[0])
    sims = _unit(demb[0]) @ temb.T
    best = sims.argmax(axis=1)
    nearest = [(e, train[j], float(row[j])) for e, j, row in zip(dev, best, sims) if e.re_class != "none"]
    similar = {t: count((q for q in nearest if q[2] >= t), lambda q: q[0].re_class == q[1].re_class) for t in similar_t}
    return DevFigures(len(dev), sum(1 for e in dev if e.re_class != "none"), model.version, classes, comps, rules,
                      heads, similar, cfg.class_confidence)
