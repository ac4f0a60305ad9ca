"""Distilling the fast head (classifier/fast_path.py) from a trained model, and measuring how often it agrees.

The distillation set is the training split plus every snapshot issue nobody labeled (none of them is in the dev
split, which only measures). Targets are the model's own embedding logits, so no label is used here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retriage.classifier.fast_path import (ALPHA, BOW_WEIGHT, COMPONENT_AGREEMENT, RE_AGREEMENT, SIM_ALPHA,
                                           FastHead, choose_margin, idf_weights, margins)
from retriage.classifier.features import Views, views
from retriage.classifier.model import IssueClassifier
from retriage.classifier.static_embed import StaticMiniLM

FOLDS = 5


def unlabeled_snapshot_views(labeled: set[tuple[str, int]]) -> list[Views]:
    """Views of the snapshot issues that are not in the labeled set (pull requests left out)."""
    from retriage.classifier.dataset import snapshot_index

    return [views(r.get("title"), r.get("body")) for key, r in sorted(snapshot_index().items())
            if key not in labeled and not r.get("pull_request") and not r.get("is_pull_request")]


def _fit(X, Y, alpha: float):
    from sklearn.linear_model import Ridge

    return Ridge(alpha=alpha).fit(X, Y)


def fit_fast_head(model: IssueClassifier, static: StaticMiniLM, v: list[Views], embeddings: list[np.ndarray],
                  seed: int = 0) -> FastHead:
    """Fit the fast head's ridge maps on issues `v` with their MiniLM view embeddings (the gate comes next)."""
    from sklearn.model_selection import KFold

    n_re = len(model.re_head.classes)
    target = np.hstack(model.embedding_logits(embeddings))
    lex_re, lex_comp = model.lexical_logits(v)
    ids = static.token_ids([x.full for x in v])
    head = FastHead(idf_weights(ids, static.table.shape[0]), np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0),
                    np.zeros(0), n_re)
    avgs, ids_by_view = head.static_features(static, v)
    X = head.design_matrix(avgs, ids_by_view)

    # out-of-fold fast answers: how well the regression carries over (reported, not used for the gate: the model
    # fits its own training issues too well for them to show where fast and full answers part)
    oof = np.zeros_like(target)
    for tr, te in KFold(FOLDS, shuffle=True, random_state=seed).split(X):
        oof[te] = _fit(X[tr], target[tr], ALPHA).predict(X[te])
    same_re = (lex_re + oof[:, :n_re]).argmax(1) == (lex_re + target[:, :n_re]).argmax(1)
    same_comp = (lex_comp + oof[:, n_re:]).argmax(1) == (lex_comp + target[:, n_re:]).argmax(1)

    ridge = _fit(X, target, ALPHA)
    coef = ridge.coef_.T.astype(np.float32)  # (features, k)
    width = avgs.shape[1]
    head.w_static, head.w_bow = coef[:width], coef[width:] * np.float32(BOW_WEIGHT)
    head.bias = ridge.intercept_.astype(np.float32)
    sim = _fit(avgs, embeddings[0], SIM_ALPHA)
    head.w_sim, head.b_sim = sim.coef_.T.astype(np.float32), sim.intercept_.astype(np.float32)
    head.meta = {"n_distill": len(v), "alpha": ALPHA, "bow_weight": BOW_WEIGHT, "sim_alpha": SIM_ALPHA,
                 "out_of_fold": {"re_agreement_fast_only": round(float(same_re.mean()), 4),
                                 "component_agreement_fast_only": round(float(same_comp.mean()), 4)}}
    return head


def _answers(model: IssueClassifier, head: FastHead, static: StaticMiniLM, v: list[Views],
             embeddings: list[np.ndarray]):
    """(fast RE probs, fast component probs, full RE classes, full components, static averages)."""
    lex_re, lex_comp = model.lexical_logits(v)
    full_re, full_comp = model.embedding_logits(embeddings)
    avgs, ids = head.static_features(static, v)
    fast_re, fast_comp = head.embedding_logits(avgs, ids)
    p_re, p_comp = model.probabilities(lex_re + fast_re, lex_comp + fast_comp)
    return p_re, p_comp, (lex_re + full_re).argmax(1), (lex_comp + full_comp).argmax(1), avgs


def _margins_for(p_re, p_comp, t_re, t_comp) -> tuple[float, float]:
    return (choose_margin(margins(p_re), p_re.argmax(1) == t_re, RE_AGREEMENT),
            choose_margin(margins(p_comp), p_comp.argmax(1) == t_comp, COMPONENT_AGREEMENT))


def choose_gate(model: IssueClassifier, head: FastHead, static: StaticMiniLM, v: list[Views],
                embeddings: list[np.ndarray]) -> dict:
    """Set the head's margins on issues the model was not trained on (the dev split), so that the classify path
    agrees with the full model on RE_AGREEMENT of them (COMPONENT_AGREEMENT for components). Returns a
    two-fold check: margins chosen on one half of the issues, agreement measured on the other."""
    p_re, p_comp, t_re, t_comp, _ = _answers(model, head, static, v, embeddings)
    head.re_margin, head.component_margin = _margins_for(p_re, p_comp, t_re, t_comp)
    halves = [np.arange(len(v)) % 2 == k for k in (0, 1)]
    checks = []
    for pick, other in (halves, halves[::-1]):
        m_re, m_comp = _margins_for(p_re[pick], p_comp[pick], t_re[pick], t_comp[pick])
        gate = (margins(p_re[other]) >= m_re) & (margins(p_comp[other]) >= m_comp)
        checks.append((np.mean((p_re[other].argmax(1) == t_re[other]) | ~gate),
                       np.mean((p_comp[other].argmax(1) == t_comp[other]) | ~gate), gate.mean()))
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


def agreement(model: IssueClassifier, head: FastHead, static: StaticMiniLM, v: list[Views],
              embeddings: list[np.ndarray], neighbours: np.ndarray | None = None) -> Agreement:
    """Compare on issues `v` (with their MiniLM view embeddings). `neighbours`: unit MiniLM vectors of a
    collection to search for the similar-issues overlap (default: the issues' own first views)."""
    p_re, p_comp, t_re, t_comp, avgs = _answers(model, head, static, v, embeddings)
    gate = head.confident(p_re, p_comp)
    same_re, same_comp = p_re.argmax(1) == t_re, p_comp.argmax(1) == t_comp

    coll = embeddings[0] if neighbours is None else neighbours
    est = head.first_view_vector(avgs)
    overlap = []
    for i in range(len(v)):
        a, b = coll @ embeddings[0][i], coll @ est[i]
        if neighbours is None:
            a[i] = b[i] = -np.inf  # not the issue itself
        overlap.append(len(set(np.argsort(-a)[:5]) & set(np.argsort(-b)[:5])) / 5)
    return Agreement(len(v), float(np.mean(same_re | ~gate)), float(np.mean(same_comp | ~gate)), float(gate.mean()),
                     float(same_re.mean()), float(same_comp.mean()), float(np.mean(overlap)) if overlap else 0.0)
