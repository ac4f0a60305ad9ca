"""Distilling the fast head (classifier/fast_path.py) from a trained model, and measuring how often it agrees.

The distillation set is the training split plus four fifths of the snapshot issues nobody labeled (none of them
is in the dev split, which chooses the gate); the last fifth (`snapshot_part`) is held out from both, to measure
on. Targets are the model's own embedding logits, so no label is used here.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from retriage.classifier.fast_path import (ALPHA, BOW_WEIGHT, COMPONENT_AGREEMENT, RE_AGREEMENT, SIM_ALPHA,
                                           VOTE_ALPHA, FastHead, choose_margin, idf_weights, margins)
from retriage.classifier.features import Views, views
from retriage.classifier.model import IssueClassifier
from retriage.classifier.nearest_labels import representation
from retriage.classifier.static_embed import StaticMiniLM

PARTS = ("fit", "fit", "fit", "fit", "report")  # the unlabeled snapshot issues, by a hash of their key


def snapshot_part(key: tuple[str, int]) -> str:
    """Which part of the distillation an unlabeled snapshot issue belongs to: "fit" (the ridge maps) or "report"
    (neither the maps nor the gate, which the dev split chooses: the agreement is measured there, bench/label).
    (Choosing the gate on dev and a part of these issues together loosened it: they are easier than dev, and
    the real traces lost two answers.)"""
    digest = hashlib.sha256(f"{key[0]}#{key[1]}".encode()).digest()
    return PARTS[digest[0] % len(PARTS)]


def unlabeled_snapshot_views(labeled: set[tuple[str, int]], part: str | None = None) -> list[Views]:
    """Views of the snapshot issues that are not in the labeled set (pull requests left out); `part`: only
    those of one part (see snapshot_part)."""
    return [views(r.get("title"), r.get("body")) for key, r in unlabeled_snapshot_issues(labeled, part)]


def unlabeled_snapshot_issues(labeled: set[tuple[str, int]], part: str | None = None) -> list[tuple[tuple, dict]]:
    from retriage.classifier.dataset import snapshot_index

    return [(key, r) for key, r in sorted(snapshot_index().items())
            if key not in labeled and not r.get("pull_request") and (part is None or snapshot_part(key) == part)]


def _fit(X, Y, alpha: float):
    from sklearn.linear_model import Ridge

    return Ridge(alpha=alpha).fit(X, Y)


def fit_fast_head(model: IssueClassifier, static: StaticMiniLM, v: list[Views],
                  embeddings: list[np.ndarray]) -> FastHead:
    """Fit the fast head's ridge maps on issues `v` with their MiniLM view embeddings (the gate comes next)."""
    n_re = len(model.re_head.classes_)
    target = np.hstack(model.embedding_logits(embeddings))
    ids_by_view = FastHead.view_ids(static, v)
    nothing = np.zeros(0)
    head = FastHead(idf_weights(ids_by_view["full"], static.table.shape[0]), nothing, nothing, nothing, nothing,
                    nothing, nothing, nothing, n_re)
    avgs, _ = head.static_features(static, v, ids_by_view)
    ridge = _fit(head.design_matrix(avgs, ids_by_view), target, ALPHA)
    coef = ridge.coef_.T.astype(np.float32)  # (features, k)
    width = avgs.shape[1]
    head.w_static, head.w_bow = coef[:width], coef[width:] * np.float32(BOW_WEIGHT)
    head.bias = ridge.intercept_.astype(np.float32)
    sim = _fit(avgs, embeddings[0], SIM_ALPHA)
    head.w_sim, head.b_sim = sim.coef_.T.astype(np.float32), sim.intercept_.astype(np.float32)
    vote = _fit(avgs, representation(embeddings), VOTE_ALPHA)
    head.w_vote, head.b_vote = vote.coef_.T.astype(np.float32), vote.intercept_.astype(np.float32)
    head.meta = {"n_distill": len(v), "alpha": ALPHA, "bow_weight": BOW_WEIGHT, "sim_alpha": SIM_ALPHA,
                 "vote_alpha": VOTE_ALPHA, "static_dim": int(static.table.shape[1])}
    return head


@dataclass
class Answers:
    """The fast head's answers (calibrated probabilities) and the full model's classes, on some issues."""

    p_re: np.ndarray
    p_comp: np.ndarray
    full_re: np.ndarray  # class indices
    full_comp: np.ndarray
    static_avgs: np.ndarray


def answers(model: IssueClassifier, head: FastHead, static: StaticMiniLM, v: list[Views],
            embeddings: list[np.ndarray]) -> Answers:
    """Both answers for issues `v` with their MiniLM view embeddings (the lexical part computed once): the fast
    head's, and the full model's with its neighbours' votes."""
    lex_re, lex_comp = model.lexical_logits(v)
    full_re, full_comp = model.embedding_logits(embeddings)
    avgs, ids = head.static_features(static, v)
    fast_re, fast_comp = head.embedding_logits(avgs, ids)
    p_re, p_comp = head.probabilities(model, lex_re + fast_re, lex_comp + fast_comp, avgs)  # estimated votes
    q_re, q_comp = model.probabilities(lex_re + full_re, lex_comp + full_comp, embeddings)
    return Answers(p_re, p_comp, q_re.argmax(1), q_comp.argmax(1), avgs)


def _margins_for(a: Answers, pick) -> tuple[float, float]:
    return (choose_margin(margins(a.p_re[pick]), a.p_re[pick].argmax(1) == a.full_re[pick], RE_AGREEMENT),
            choose_margin(margins(a.p_comp[pick]), a.p_comp[pick].argmax(1) == a.full_comp[pick], COMPONENT_AGREEMENT))


def choose_gate(head: FastHead, a: Answers) -> dict:
    """Set the head's margins on issues the model was not trained on (the dev split), so that the classify path
    agrees with the full model on RE_AGREEMENT of them (COMPONENT_AGREEMENT for components). Returns a
    two-fold check: margins chosen on one half of the issues, agreement measured on the other."""
    everything = np.ones(len(a.p_re), dtype=bool)
    head.re_margin, head.component_margin = _margins_for(a, everything)
    halves = [np.arange(len(a.p_re)) % 2 == k for k in (0, 1)]
    checks = []
    for pick, other in (halves, halves[::-1]):
        m_re, m_comp = _margins_for(a, pick)
        gate = (margins(a.p_re[other]) >= m_re) & (margins(a.p_comp[other]) >= m_comp)
        checks.append((np.mean((a.p_re[other].argmax(1) == a.full_re[other]) | ~gate),
                       np.mean((a.p_comp[other].argmax(1) == a.full_comp[other]) | ~gate), gate.mean()))
    re_ag, comp_ag, share = np.mean(checks, axis=0)
    return {"re_agreement": round(float(re_ag), 4), "component_agreement": round(float(comp_ag), 4),
            "fast_share": round(float(share), 4)}


@dataclass
class Agreement:
    """How the fast path (gated by the head's margins) compares with the full model on some issues."""

    n: int
    re_agreement: float  # classify path: fast answers where the gate lets them through, the full model elsewhere
    component_agreement: float
    fast_share: float  # share answered by the fast path alone
    re_agreement_fast_only: float  # the fast head on every issue, no gate
    component_agreement_fast_only: float
    similar_overlap: float  # mean share of the full model's 5 nearest issues found by the fast estimate

    def to_dict(self) -> dict:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


def agreement(head: FastHead, a: Answers, first_view: np.ndarray) -> Agreement:
    """Compare the gated fast path with the full model on the issues of `a`; `first_view`: their MiniLM vectors
    of the first view, searched among themselves for the similar-issues overlap."""
    gate = head.confident(a.p_re, a.p_comp)
    same_re, same_comp = a.p_re.argmax(1) == a.full_re, a.p_comp.argmax(1) == a.full_comp
    est = head.first_view_vector(a.static_avgs)
    overlap = []
    for i in range(len(first_view)):
        full, fast = first_view @ first_view[i], first_view @ est[i]
        full[i] = fast[i] = -np.inf  # not the issue itself
        overlap.append(len(set(np.argsort(-full)[:5]) & set(np.argsort(-fast)[:5])) / 5)
    return Agreement(len(gate), float(np.mean(same_re | ~gate)), float(np.mean(same_comp | ~gate)), float(gate.mean()),
                     float(same_re.mean()), float(same_comp.mean()), float(np.mean(overlap)) if overlap else 0.0)
