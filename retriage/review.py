"""`retriage review`: the issues a correction would teach most, and the confirm-or-correct loop over them.

Three kinds of issue are worth a maintainer's minute:

- *unsure*: the model's RE-class confidence is lowest;
- *far*: the issue is unlike every labeled issue (its nearest labeled neighbour, cosine of its first view's
  MiniLM vector to the neighbours' vectors, is furthest); each pick counts as labeled for the next one, so the
  picks spread over different unfamiliar regions;
- *new words*: words the model's vocabulary lacks, shared by several of the candidates (a topic the labeled set
  never met: a new cache kind, a new transport); one issue per such cluster.

The queue takes the three lists in turn (unsure, far, new words, unsure, ...) without repeats. `rank` is pure and
shared with the time-forward simulation (bench/review_sim). Confirmations and corrections are stored as `relabel`
stores corrections (table `corrections`; a confirmation repeats the prediction with the reason "confirmed"), and
the nearest-label votes read them at once (classifier/nearest_labels.with_corrections).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Callable

import numpy as np

KINDS = ("unsure", "far", "new_words")
MIN_WORD = 4  # a new word has at least this many characters
MIN_CLUSTER = 2  # ... and occurs in at least this many candidates
DEFAULT_DAYS = 30  # without --since: the newest 30 days the database holds
_WORD = re.compile(r"[a-z_][a-z0-9_]+")
_NUMBERISH = re.compile(r"^[a-z_]*\d")  # hex ids, versions, builds: not a topic


_NOT_TOPIC = re.compile(r"@[\w-]+|https?://\S+")  # mentions (people, not topics) and links


def words(text: str) -> set[str]:
    text = _NOT_TOPIC.sub(" ", text.lower())
    return {w for w in _WORD.findall(text) if len(w) >= MIN_WORD and not _NUMBERISH.match(w)}


def new_words(texts: list[str], vocabulary) -> list[set[str]]:
    """Per text, the words the vocabulary lacks that at least MIN_CLUSTER of the texts share (and at most a
    third of them, when there are many: a word every issue has is not a topic)."""
    own = [words(t) - vocabulary for t in texts]
    df = Counter(w for ws in own for w in ws)
    top = max(MIN_CLUSTER, len(texts) // 3)
    return [{w for w in ws if MIN_CLUSTER <= df[w] <= top} for ws in own]


@dataclass
class Pick:
    index: int  # into the candidates
    kind: str  # which list chose it (unsure, far, new_words)
    confidence: float
    nearest: float
    words: list[str] = field(default_factory=list)

    def why(self) -> str:
        if self.kind == "unsure":
            return f"unsure (confidence {self.confidence:.2f})"
        if self.kind == "far":
            return f"unlike the labeled issues (nearest {self.nearest:.2f})"
        return "new words: " + ", ".join(self.words[:4])


def rank(confidence: np.ndarray, nearest: np.ndarray, vectors: np.ndarray, fresh: list[set[str]],
         limit: int) -> list[Pick]:
    """Up to `limit` candidates, the three lists in turn. `confidence`: the RE class's probability; `nearest`:
    the similarity to the nearest labeled issue; `vectors`: unit vectors (to update `nearest` as issues are
    picked); `fresh`: each candidate's new words (`new_words`)."""
    n = len(confidence)
    limit = min(limit, n)
    near = np.asarray(nearest, dtype=np.float64).copy()
    taken: set[int] = set()
    covered: set[str] = set()
    unsure = iter(np.argsort(confidence, kind="stable").tolist())
    df = Counter(w for ws in fresh for w in ws)
    out: list[Pick] = []

    def take(i: int, kind: str, ws: list[str] | None = None) -> None:
        nonlocal near
        taken.add(i)
        covered.update(fresh[i])
        out.append(Pick(i, kind, float(confidence[i]), float(nearest[i]),
                        ws or sorted(fresh[i], key=lambda w: (-df[w], w))))
        near = np.maximum(near, vectors @ vectors[i])

    def next_unsure() -> bool:
        for i in unsure:
            if i not in taken:
                take(i, "unsure")
                return True
        return False

    def next_far() -> bool:
        free = [i for i in range(n) if i not in taken]
        if not free:
            return False
        take(min(free, key=lambda i: (near[i], i)), "far")
        return True

    def next_cluster() -> bool:
        best, best_words = None, []
        for i in range(n):
            if i in taken:
                continue
            ws = sorted(fresh[i] - covered, key=lambda w: (-df[w], w))
            if ws and (best is None or (df[ws[0]], len(ws), -confidence[i]) >
                       (df[best_words[0]], len(best_words), -confidence[best])):
                best, best_words = i, ws
        if best is None:
            return False
        take(best, "new_words", best_words)
        return True

    order = [next_unsure, next_far, next_cluster]
    while len(out) < limit:
        moved = False
        for step in order:
            if len(out) < limit and step():
                moved = True
        if not moved:
            break
    return out[:limit]


# ---- the queue from a database ---------------------------------------------------------------------------------
def _repos(engines: tuple[str, ...] | list[str]) -> list[str]:
    from retriage import taxonomy
    from retriage.core.errors import UserError

    repos: list[str] = []
    for name in engines:
        e = taxonomy.engine_by_alias(name)
        if e is None:
            raise UserError(f"--engine must be one of {', '.join(x.id for x in taxonomy.engines())}, not "
                            f"{name[:40]!r}", exit_code=2)
        repos += [e.repo, *e.former_repos]
    return repos


def candidates(con, model_version: str, since=None, repos: list[str] | None = None) -> list[dict]:
    """Issues with a prediction of the model, no correction and no team label, created on or after `since`
    (default: the newest DEFAULT_DAYS days the database holds for these repositories), with their first view's
    vector where it is cached."""
    from retriage.classifier import EMBEDDING_MODEL

    where, params = "NOT i.is_pull_request", []
    if repos:
        where += " AND list_contains(?::TEXT[], i.repo)"
        params.append(repos)
    if since is None:
        newest = con.execute(f"SELECT max(i.created_at) FROM issues i WHERE {where}", params).fetchone()[0]
        if newest is None:
            return []
        since = newest - timedelta(days=DEFAULT_DAYS)
    rows = con.execute(
        f"""SELECT i.repo, i.number, i.title, i.body, i.html_url, i.created_at, p.re_class, p.component,
                   p.confidence, p.known_fixes, e.vector
            FROM issues i JOIN predictions p ON p.repo = i.repo AND p.number = i.number AND p.model_version = ?
            LEFT JOIN issue_embeddings ie ON ie.repo = i.repo AND ie.number = i.number AND ie.model = ?
            LEFT JOIN embeddings e ON e.text_hash = ie.text_hash AND e.model = ie.model
            WHERE {where} AND i.created_at >= ?
              AND NOT EXISTS (SELECT 1 FROM corrections c WHERE c.repo = i.repo AND c.number = i.number)
              AND NOT EXISTS (SELECT 1 FROM gold_labels g WHERE g.repo = i.repo AND g.number = i.number)
            ORDER BY i.created_at DESC, i.repo, i.number""",
        [model_version, EMBEDDING_MODEL, *params, since]).fetchall()
    names = ("repo", "number", "title", "body", "html_url", "created_at", "re_class", "component", "confidence",
             "known_fixes", "vector")
    return [dict(zip(names, r)) for r in rows]


def build_queue(con, model, since=None, engines=(), limit: int = 10) -> list[dict]:
    """The review queue: up to `limit` issues, each with its prediction and why it is worth a correction."""
    from retriage.classifier.embed import DIM
    from retriage.classifier.nearest_labels import with_corrections
    from retriage.core.errors import UserError
    from retriage.core.refs import format_ref

    if not 1 <= limit <= 1000:
        raise UserError(f"--limit must be from 1 to 1000, not {limit}", exit_code=2)
    if model.version is None:
        raise UserError("no trained model: run `retriage train`")
    rows = candidates(con, model.version, since, _repos(engines) or None)
    if not rows:
        return []
    vec = np.zeros((len(rows), DIM), dtype=np.float32)
    has = np.zeros(len(rows), dtype=bool)
    for i, r in enumerate(rows):
        if r["vector"] is not None:
            v = np.asarray(r["vector"], dtype=np.float32)
            vec[i], has[i] = v / (np.linalg.norm(v) + 1e-9), True
    nl = with_corrections(model, con).nearest_labels
    nearest = np.ones(len(rows), dtype=np.float32)  # an issue without a vector is never "far"
    if nl is not None and has.any():
        nearest[has] = (vec[has] @ nl.vectors.T).max(1)
    vocabulary = {w for w in model.tfidf.vocab_ if " " not in w}
    fresh = new_words([f"{r['title'] or ''}\n{r['body'] or ''}" for r in rows], vocabulary)
    conf = np.array([r["confidence"] if r["confidence"] is not None else 0.0 for r in rows])
    out = []
    for p in rank(conf, nearest, vec, fresh, limit):
        r = rows[p.index]
        fixes = list(r["known_fixes"] or [])
        out.append({"ref": format_ref(r["repo"], r["number"]), "repo": r["repo"], "number": r["number"],
                    "title": r["title"], "html_url": r["html_url"],
                    "created_at": r["created_at"].isoformat() if r["created_at"] else None,
                    "re_class": r["re_class"], "re_confidence": round(float(conf[p.index]), 4),
                    "component": r["component"], "known_fix": fixes[0] if fixes else "none",
                    "kind": p.kind, "nearest": round(p.nearest, 4), "new_words": p.words[:8], "why": p.why()})
    return out


# ---- confirm or correct ----------------------------------------------------------------------------------------
CONFIRMED = "confirmed"


def record(db, item: dict, re_class: str | None = None, component: str | None = None, fix: str | None = None,
           by: str | None = None, model_version: str | None = None) -> dict:
    """A confirmation (nothing given: the prediction, reason "confirmed") or a correction, stored as `relabel`
    stores one."""
    from retriage.corrections import relabel

    if re_class is None and component is None and fix is None:
        return relabel(db, item["ref"], item["re_class"], item["component"], item["known_fix"], CONFIRMED, by,
                       model_version)
    return relabel(db, item["ref"], re_class or item["re_class"], component or item["component"],
                   fix or item["known_fix"], "corrected in review", by, model_version)


@dataclass
class Session:
    confirmed: int = 0
    corrected: int = 0
    skipped: int = 0
    quit: bool = False


def run_session(db, items: list[dict], key: Callable[[], str], choose: Callable[[str, list[str], str], str],
                say: Callable[[str], None], by: str | None = None, model_version: str | None = None) -> Session:
    """The one-key loop: y confirms, c corrects (asks class, component and fix, each defaulting to the
    prediction), s skips, q quits. `key` reads one key, `choose(what, choices, default)` one choice."""
    from retriage import taxonomy

    s = Session()
    for n, item in enumerate(items, 1):
        say(f"[{n}/{len(items)}] {item['ref']}  {item['title'] or ''}\n    {item['html_url'] or ''}\n"
            f"    predicted {item['re_class']} ({item['re_confidence']:.2f}) / {item['component']} / fix "
            f"{item['known_fix']} — {item['why']}\n    y confirm · c correct · s skip · q quit")
        while True:
            k = (key() or "").lower()
            if k in ("y", "c", "s", "q"):
                break
            say("    y, c, s or q")
        if k == "q":
            s.quit = True
            break
        if k == "s":
            s.skipped += 1
            continue
        if k == "y":
            record(db, item, by=by, model_version=model_version)
            s.confirmed += 1
            say(f"    confirmed {item['re_class']} / {item['component']}")
            continue
        c = choose("class", taxonomy.re_class_ids(), item["re_class"])
        comp = choose("component", taxonomy.component_ids(), item["component"])
        fix = choose("fix", taxonomy.fix_tag_ids(), item["known_fix"])
        row = record(db, item, c, comp, fix, by, model_version)
        s.corrected += 1
        say(f"    corrected to {row['re_class']} / {row['component']} / fix {row['known_fix']}")
    return s


def since_day(value: str | None):
    """--since as a datetime (None: the default window)."""
    from retriage.core.days import parse_day

    day = parse_day(value, "--since")
    return datetime(day.year, day.month, day.day) if day else None


# ---- label --changed -------------------------------------------------------------------------------------------
def changed_issues(con, model) -> list[tuple[str, int]]:
    """The issues whose nearest labeled neighbours changed since their prediction of this model was stored: a
    correction or confirmation recorded after it is among their k nearest (their first view's vector against
    the neighbours' vectors, corrections included), or the issue itself was corrected since."""
    from retriage.classifier import EMBEDDING_MODEL
    from retriage.classifier.nearest_labels import corrected_neighbours

    nl = model.nearest_labels
    if nl is None or nl.weight <= 0 or model.version is None:
        return []
    c = corrected_neighbours(con)
    if not c.keys:
        return []
    rows = con.execute(
        """SELECT p.repo, p.number, max(p.labeled_at), any_value(e.vector)
           FROM predictions p JOIN issues i ON i.repo = p.repo AND i.number = p.number
           LEFT JOIN issue_embeddings ie ON ie.repo = p.repo AND ie.number = p.number AND ie.model = ?
           LEFT JOIN embeddings e ON e.text_hash = ie.text_hash AND e.model = ie.model
           WHERE p.model_version = ? AND NOT i.is_pull_request AND p.labeled_at < ?
           GROUP BY p.repo, p.number ORDER BY p.repo, p.number""",
        [EMBEDDING_MODEL, model.version, max(c.at)]).fetchall()
    at = np.array([np.datetime64(t) for t in c.at])
    own = {k: t for k, t in zip(c.keys, at)}
    out = []
    with_vec = [r for r in rows if r[3] is not None]
    if with_vec:
        v = np.array([r[3] for r in with_vec], dtype=np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True) + 1e-9
        k = max(1, min(nl.k, len(nl.vectors)))
        kth = np.partition(v @ nl.vectors.T, -k, axis=1)[:, -k] if len(nl.vectors) else np.full(len(v), -1.0)
        s = v @ c.vectors.T
        labeled = np.array([np.datetime64(r[2]) for r in with_vec])
        newer = at[None, :] > labeled[:, None]
        hit = ((s >= kth[:, None]) & newer).any(1)
        out = [(r[0], r[1]) for r, h in zip(with_vec, hit) if h]
    chosen = set(out)
    out += [(r[0], r[1]) for r in rows if (r[0], r[1]) in own and (r[0], r[1]) not in chosen
            and own[(r[0], r[1])] > np.datetime64(r[2])]
    return sorted(out)
