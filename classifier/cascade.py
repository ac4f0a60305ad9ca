"""The cascade behind `retriage label --fast`: the fast head of `classify` (classifier/fast_path.py) answers
where its gate is open, the full model (MiniLM on the three views) only where it is closed.

Two passes over the pending issues, both spread over worker processes (one BLAS thread each):

1. *read*: each chunk of issues is prepared (views, rules), its lexical logits computed, its static MiniLM
   features pooled and the fast answer gated on its RE classes only (its two likeliest at least the head's
   `re_margin` apart; `classify` also gates on components). bench/label measured the component gate in the same
   run: half the throughput (66 against 136 issues/s, under 5x sentence-transformers on one view) for 4.6
   points of component agreement, RE agreement 100 % either way, so bulk labeling leaves it out. Answers whose
   gate is open are stored at once: the class and
   component of the fast head (with the nearest labeled issues' votes, found by its estimate of the issue's
   vote vector), the known fixes of the matching rules (the fix head reads the MiniLM views, so
   its tag is left out on the fast path), both settled by classifier/decision.py. No vector is stored for them:
   the `embeddings` table holds only MiniLM's own vectors of real texts, never the fast head's estimates.
2. *embed*: the issues whose gate is closed get their three views embedded (the numpy MiniLM, through the
   database's embedding cache) and the full model's answer, exactly as `label --exact` gives it.

Each chunk commits in one transaction, so an interrupted run keeps what it finished.
"""

from __future__ import annotations

import multiprocessing
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np

from retriage.classifier import EMBEDDING_MODEL, device_class
from retriage.classifier.decision import FAST, FULL, decide, prediction_row
from retriage.classifier.embed import text_hash
from retriage.classifier.fast_path import margins
from retriage.classifier.features import VIEW_FIELDS
from retriage.classifier.model import IssueClassifier
from retriage.db import writes
from retriage.db.store import transaction
from retriage.taxonomy import engine_for_repo

TASK = 64  # issues per task handed to a worker


@dataclass
class Reading:
    """Pass 1 over a chunk of issues (picklable: it travels back from a worker)."""

    keys: list[tuple[str, int]]
    gate: np.ndarray  # True: the fast answer stands
    z_re: np.ndarray  # fast logits (lexical + estimated embedding part)
    z_comp: np.ndarray
    lex_re: np.ndarray
    lex_comp: np.ndarray
    lex_fix: np.ndarray | None
    vote: np.ndarray  # estimated vote vectors (the fast answers take the nearest labeled issues' votes with them)
    rule_fixes: list[list[str]]
    texts: list[tuple[str, str, str] | None]  # view texts where the gate is closed
    device_classes: list[str | None]  # the class a rule names for the issue's mixed GPUs (device_class.py)


class Reader:
    """What a worker holds: the model, its fast head and the static vectors, the numpy MiniLM."""

    def __init__(self, model_folder: Path | None = None):
        from retriage.classifier.fast_path import FastHead
        from retriage.classifier.static_embed import StaticMiniLM, check_table

        self.model = IssueClassifier.load(model_folder)
        self.head, why = FastHead.load(self.model.folder, self.model.version)
        table, why_table = check_table()
        if self.head is None or table is None:
            raise FastPathUnavailable(why or why_table)
        self.static = StaticMiniLM(table)
        self._minilm = None

    def read(self, part: list[tuple]) -> Reading:
        from retriage.classifier.features import views

        v = [views(title, body) for _, _, title, body in part]
        lex_re, lex_comp, lex_fix = self.model.lexical_logits(v, with_fix=True)
        avgs, ids = self.head.static_features(self.static, v)
        f_re, f_comp = self.head.embedding_logits(avgs, ids)
        z_re, z_comp = lex_re + f_re, lex_comp + f_comp
        vote = self.head.vote_vector(avgs)
        gate = margins(self.model.probabilities(z_re, z_comp, [vote])[0]) >= self.head.re_margin  # RE gate only
        fixes, device = [], []
        for (repo, _, _, body), x in zip(part, v):
            engine = _engine(repo)
            fixes.append(x.fixes(engine))
            device.append(device_class.mixed_gpu_class(x, body, engine))
        texts = [None if g else tuple(getattr(x, f) for f in VIEW_FIELDS) for g, x in zip(gate, v)]
        return Reading([(r, n) for r, n, _, _ in part], gate, z_re, z_comp, lex_re, lex_comp, lex_fix, vote, fixes,
                       texts, device)

    def embed(self, texts: list[str]) -> np.ndarray:
        from retriage.classifier.embed import NumpyMiniLM

        if self._minilm is None:
            self._minilm = NumpyMiniLM()
        return self._minilm.encode(texts)


class FastPathUnavailable(Exception):
    pass


_reader: Reader | None = None


def _init_worker(model_folder: str | None) -> None:
    global _reader
    _reader = Reader(Path(model_folder) if model_folder else None)


def _read(part: list[tuple]) -> Reading:
    return _reader.read(part)


def _embed(texts: list[str]) -> np.ndarray:
    return _reader.embed(texts)


def default_workers() -> int:
    return max(1, min(2, os.cpu_count() or 1))


class _InProcess:
    """The pool's interface over one in-process Reader (small runs, or one worker)."""

    def __init__(self, reader: Reader):
        self.reader = reader

    def imap(self, fn, items):
        fn = {_read: self.reader.read, _embed: self.reader.embed}[fn]
        return (fn(x) for x in items)

    def close(self):
        pass


def _pool(model: IssueClassifier, workers: int, n: int, task: int):
    reader = Reader(model.folder)  # here first: FastPathUnavailable before any worker starts
    if workers <= 1 or n <= task:
        return _InProcess(reader)
    before = os.environ.get("OPENBLAS_NUM_THREADS")
    os.environ["OPENBLAS_NUM_THREADS"] = "1"  # read by the workers' numpy as it loads
    try:
        ctx = multiprocessing.get_context("spawn")  # no fork of a process holding a DuckDB connection
        pool = ctx.Pool(workers, _init_worker, (str(model.folder) if model.folder else None,))
    finally:
        if before is None:
            os.environ.pop("OPENBLAS_NUM_THREADS", None)
        else:
            os.environ["OPENBLAS_NUM_THREADS"] = before
    return pool


@dataclass
class CascadeStats:
    fast: int = 0  # answered by the fast head
    full: int = 0  # answered by the full model


def label_cascade(con, model: IssueClassifier, todo: list[tuple], progress: Callable[[int], None] | None = None,
                  workers: int | None = None, task: int = TASK) -> CascadeStats:
    """Label the issues `todo` (repo, number, title, body) through the cascade; see the module docstring.
    `task`: issues per task of a worker (with fewer issues than that, everything runs in this process)."""
    stats = CascadeStats()
    if not todo:
        return stats
    pool = _pool(model, workers or default_workers(), len(todo), task)
    try:
        closed: list[tuple[Reading, int]] = []
        tasks = [todo[i : i + task] for i in range(0, len(todo), task)]
        for reading in pool.imap(_read, tasks):
            _store_fast(con, model, reading)
            closed += [(reading, i) for i in np.flatnonzero(~reading.gate)]
            stats.fast += int(reading.gate.sum())
            if progress:
                progress(int(reading.gate.sum()))
        groups = [closed[i : i + task] for i in range(0, len(closed), task)]
        for group, vectors in zip(groups, _embedded(con, pool, groups)):
            _store_full(con, model, group, vectors)
            stats.full += len(group)
            if progress:
                progress(len(group))
    finally:
        pool.close()
    return stats


def _now():
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _engine(repo: str) -> str | None:
    engine = engine_for_repo(repo)
    return engine.id if engine else None


def _store_fast(con, model: IssueClassifier, r: Reading) -> None:
    idx = np.flatnonzero(r.gate)
    if not len(idx):
        return
    preds = model.predictions(r.z_re[idx], r.z_comp[idx], [r.vote[idx]])
    now = _now()
    rows = []
    for i, p in zip(idx, preds):
        repo, number = r.keys[i]
        d = decide(p, r.rule_fixes[i], _engine(repo), r.device_classes[i], model.version, FAST)
        rows.append(prediction_row(repo, number, p, d, model.version, now))
    with transaction(con):  # the prediction only: an estimated vector is never stored as an embedding
        writes.save_predictions(con, rows)


def _embedded(con, pool, groups: list[list[tuple[Reading, int]]]):
    """The view vectors of each group of closed-gate issues: from the database's cache, the rest embedded by
    the workers (in order, one group after another)."""
    from retriage.classifier.embedding_cache import lookup

    def missing_texts(group):
        texts = {t: None for r, i in group for t in r.texts[i]}
        have = lookup(con, [text_hash(t) for t in texts], EMBEDDING_MODEL)
        return have, [t for t in texts if text_hash(t) not in have]

    prepared = [missing_texts(g) for g in groups]
    for (have, texts), vecs in zip(prepared, pool.imap(_embed, [t for _, t in prepared])):
        new = {text_hash(t): v for t, v in zip(texts, vecs)}
        yield have, new


def _store_full(con, model: IssueClassifier, group: list[tuple[Reading, int]], vectors) -> None:
    have, new = vectors
    every = dict(have, **new)
    emb = [np.vstack([every[text_hash(r.texts[i][k])] for r, i in group]) for k in range(len(VIEW_FIELDS))]
    e_re, e_comp = model.embedding_logits(emb)
    lex_re = np.vstack([r.lex_re[i] for r, i in group])
    lex_comp = np.vstack([r.lex_comp[i] for r, i in group])
    preds = model.predictions(lex_re + e_re, lex_comp + e_comp, emb)
    if model.fix_head is not None and group[0][0].lex_fix is not None:
        z_fix = np.vstack([r.lex_fix[i] for r, i in group]) + np.hstack(emb) @ model.fix_head.w_dense_[
            : model.embedding_width]
        model.add_known_fixes(preds, z_fix)
    now = _now()
    rows, links = [], []
    for (r, i), p in zip(group, preds):
        repo, number = r.keys[i]
        d = decide(p, r.rule_fixes[i], _engine(repo), r.device_classes[i], model.version, FULL)
        rows.append(prediction_row(repo, number, p, d, model.version, now))
        links.append((repo, number, EMBEDDING_MODEL, text_hash(r.texts[i][0])))
    with transaction(con):
        writes.save_embeddings(con, new, EMBEDDING_MODEL)
        writes.save_predictions(con, rows)
        writes.save_issue_embeddings(con, links)
