"""`retriage label`: predict every issue in the database that has no prediction from the current model.

Works in chunks: a chunk's missing embeddings are computed without holding the database and cached as they
are done; then its predictions commit in one transaction, so an interrupted run keeps what it finished and the
next run continues with the rest. Given a `db.store.Database`, the file is held only for those short
transactions, so `show`, `stats` and `report` answer while it runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable

import duckdb

from retriage.classifier import EMBEDDING_MODEL
from retriage.classifier.decision import decide_issue, prediction_row
from retriage.classifier.embed import Embedder, get_embedder, text_hash
from retriage.classifier.features import views
from retriage.classifier.model import IssueClassifier
from retriage.classifier.embedding_cache import embed_views
from retriage.db import writes
from retriage.db.store import transaction
from retriage.taxonomy import engine_for_repo

CHUNK = 256


@dataclass
class LabelResult:
    labeled: int
    already: int
    model_version: str
    fast: int = 0  # of the labeled, answered by the fast head (`fast=True`)
    note: str = ""  # why the fast path was off although it was asked for


def pending(con: duckdb.DuckDBPyConnection, model_version: str,
            keys: list[tuple[str, int]] | None = None) -> list[tuple]:
    """Issues without a prediction of this model; with `keys`, those issues whatever they have (a relabel)."""
    if keys is not None:
        return con.execute(
            """SELECT repo, number, title, body FROM issues WHERE NOT is_pull_request
               AND list_contains(?::TEXT[], repo || '#' || number) ORDER BY repo, number""",
            [[f"{r}#{n}" for r, n in keys]]).fetchall()
    return con.execute(
        """SELECT i.repo, i.number, i.title, i.body FROM issues i
           WHERE NOT i.is_pull_request AND NOT EXISTS (
               SELECT 1 FROM predictions p WHERE p.repo = i.repo AND p.number = i.number AND p.model_version = ?)
           ORDER BY i.repo, i.number""", [model_version]).fetchall()


def label_database(con, model: IssueClassifier | None = None,
                   progress: Callable[[int], None] | None = None, embedder: Embedder | None = None,
                   on_total: Callable[[int], None] | None = None,
                   keys: list[tuple[str, int]] | None = None, fast: bool = False,
                   workers: int | None = None) -> LabelResult:
    """Label what has no prediction of the model, or with `keys` those issues (again if need be). `fast`: through
    the cascade (classifier/cascade.py: the fast head where its gate is open, the full model elsewhere, in
    `workers` processes); otherwise the full model on every issue."""
    model = model or IssueClassifier.load()
    version = model.version
    from retriage.db.versions import fill_missing

    fill_missing(con)  # the engine versions of issues stored before migration 005 (db/versions.py)
    todo = pending(con, version, keys)
    total = con.execute("SELECT count(*) FROM issues WHERE NOT is_pull_request").fetchone()[0]
    if on_total:
        on_total(len(todo))
    note = ""
    if fast:
        from retriage.classifier.cascade import FastPathUnavailable, label_cascade

        try:
            stats = label_cascade(con, model, todo, progress, workers)
            return LabelResult(len(todo), total - len(todo), version, stats.fast)
        except FastPathUnavailable as e:  # raised before anything is written
            note = f"fast path off: {e}; the full model labels every issue"
    embedder = embedder or get_embedder()

    for start in range(0, len(todo), CHUNK):
        part = todo[start:start + CHUNK]
        v = [views(title, body) for _, _, title, body in part]
        emb = embed_views(con, v, None, embedder)  # the slow part, outside the transaction
        preds = model.predict(v, emb)
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        rows = []
        for (repo, number, _, body), x, p in zip(part, v, preds):
            engine = engine_for_repo(repo)
            rows.append(prediction_row(repo, number, p, decide_issue(x, body, engine.id if engine else None, p,
                                                                     version), version, now))
        with transaction(con):
            writes.save_predictions(con, rows)
            writes.save_issue_embeddings(con, [(repo, number, EMBEDDING_MODEL, text_hash(x.full))
                                               for (repo, number, _, _), x in zip(part, v)])
        if progress:
            progress(len(part))
    return LabelResult(len(todo), total - len(todo), version, note=note)
