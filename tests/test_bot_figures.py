"""What the bot's thresholds buy (bench/experiments/bot_figures.py, `bench/bot_thresholds`): measured on the
labeled dev split with the shipped model's held-out fit. The counts must behave as counts of the statements the bot
would make: a higher threshold states a subset, every statement is about a dev issue, and the fit is the one that
never saw the dev split."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from retriage.bot.config import load_config

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # bench/experiments is not part of the package: imported from the checkout

pytestmark = pytest.mark.slow  # the held-out fit predicts the whole dev split

CLASS_T = (0.0, 0.48, 0.70, 0.85, 1.01)
COMPONENT_T = (0.0, 0.50, 0.70, 1.01)
FIX_T = (0.0, 0.15, 0.70, 1.01)
SIMILAR_T = (-1.0, 0.60, 0.75, 1.01)


@pytest.fixture(scope="module")
def figures():
    from bench.experiments.bot_figures import dev_figures

    cfg = load_config()
    return dev_figures(set(CLASS_T) | {cfg.class_confidence}, set(COMPONENT_T) | {cfg.component_confidence},
                       set(FIX_T) | {cfg.fix_head_confidence}, set(SIMILAR_T) | {cfg.similar_score}, cfg), cfg


def _nested(table: dict, what: str) -> None:
    """right <= said at every threshold, and neither grows as the threshold rises."""
    previous = None
    for t in sorted(table):
        right, said = table[t]
        assert 0 <= right <= said, (what, t, right, said)
        if previous is not None:
            assert right <= previous[0] and said <= previous[1], (what, t, (right, said), previous)
        previous = (right, said)


def test_counts_are_nested_by_threshold(figures):
    f, _ = figures
    for name in ("class_right", "component_right", "fix_head_right", "similar_right"):
        _nested(getattr(f, name), name)
        top = getattr(f, name)[max(getattr(f, name))]
        assert top == (0, 0), (name, top)  # nothing is at least 1.01 sure (or similar)


def test_counts_are_bounded_by_the_dev_split(figures):
    from retriage.classifier.dataset import load_gold, split

    f, cfg = figures
    _, dev = split(load_gold())
    assert f.n == len(dev) and f.resource == sum(e.re_class != "none" for e in dev) > 0
    # a class is stated only for a resource-class answer; the component only beside a class stated at the
    # configured threshold
    assert f.class_right[0.0][1] <= f.n
    assert f.component_right[0.0][1] == f.class_right[cfg.class_confidence][1]
    assert 0 < f.rules[1] <= f.n and 0 <= f.rules[0] <= f.rules[1]
    assert f.fix_head_right[0.0][1] <= f.n - f.rules[1]  # the head speaks only where no rule matched
    # every dev issue labeled with a resource class has a nearest training issue (cosine >= -1)
    assert f.similar_right[-1.0][1] == f.resource
    assert f.class_threshold == cfg.class_confidence


def test_the_figures_are_the_held_out_fits(figures):
    from retriage.classifier.model import IssueClassifier

    f, _ = figures
    shipped = IssueClassifier.load()
    assert f.model_version == shipped.held_out().version != shipped.version
