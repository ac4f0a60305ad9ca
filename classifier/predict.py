"""Prediction for issue records: the library function behind `retriage predict`, `retriage label` and
`retriage classify`."""

from __future__ import annotations

from typing import Callable

import duckdb

from retriage.classifier.features import Views, views
from retriage.classifier.model import IssueClassifier, Prediction
from retriage.classifier.train import embed_views
from retriage.triage.rules import match_rules


def known_fixes(text: str, engine: str | None = None) -> list[str]:
    """Fix tags of the known-fix rules that match the text, in rule priority order, without `none`."""
    tags: list[str] = []
    for m in match_rules(text.split("\n"), engine):
        if m.rule.tag != "none" and m.rule.tag not in tags:
            tags.append(m.rule.tag)
    return tags


def predict_texts(items: list[tuple[str | None, str | None]], model: IssueClassifier | None = None,
                  con: duckdb.DuckDBPyConnection | None = None, get_embedder: Callable[[], object] | None = None,
                  progress: Callable[[int], None] | None = None) -> list[Prediction]:
    """Predictions for (title, body) pairs. Embeddings go through the database cache when `con` is given."""
    return predict_views([views(t, b) for t, b in items], model, con, get_embedder, progress)


def predict_views(v: list[Views], model: IssueClassifier | None = None,
                  con: duckdb.DuckDBPyConnection | None = None, get_embedder: Callable[[], object] | None = None,
                  progress: Callable[[int], None] | None = None) -> list[Prediction]:
    """Predictions for issues whose views are already prepared."""
    model = model or IssueClassifier.load()
    if not v:
        return []
    if get_embedder is None:
        from retriage.classifier.embed import default_embedder

        batch = len(v) > 64

        def get_embedder():
            return default_embedder(batch=batch)

    emb = embed_views(con, v, progress, get_embedder)
    return model.predict(v, emb)
