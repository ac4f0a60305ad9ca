"""The labeled set: gold labels from taxonomy/labels/*.jsonl joined with issue texts, and the splits.

Three forms of record:
- corpus: only labels; title and body come from the bundled snapshot (`source` "corpus");
- real: an issue outside the corpus laid out as its real body is (template headings, the machine output it
  quotes verbatim in code blocks, the reporter's prose paraphrased), in `body` (`source` "real");
- summary: an older form, the labeler's own summary of an outside issue, in `text` (`source` "external").
A real record that rebuilds a summarised one (`rebuilds`) replaces it.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from retriage.core.bundled import snapshot_files
from retriage.core.errors import UserError
from retriage.taxonomy import LABELS_DIR, canonical_repo

DEV_SHARE = 0.25


@dataclass
class Example:
    repo: str
    number: int
    html_url: str
    title: str
    body: str
    re_class: str
    component: str
    known_fix: str
    labeler: str = ""
    reason: str = ""
    source: str = "corpus"
    created_at: str = ""  # YYYY-MM-DD of the issue, "" when unknown
    gh_labels: tuple[str, ...] = ()
    state: str = ""

    @property
    def engine(self) -> str:
        from retriage.taxonomy import engine_for_repo

        e = engine_for_repo(self.repo)
        return e.id if e else self.repo

    @property
    def key(self) -> tuple[str, int]:
        return (self.repo, self.number)


@lru_cache(maxsize=1)
def snapshot_index() -> dict[tuple[str, int], dict]:
    out = {}
    for f in snapshot_files():
        with gzip.open(f, "rt", encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                out[(canonical_repo(r["repo"]), r["number"])] = r
    return out


LABEL_FIELDS = ("re_class", "component", "known_fix", "reason", "labeler")


def label_files(folder: Path = LABELS_DIR) -> list[Path]:
    """The label files of a folder (or the one file given). (The second reader's sample for the agreement study
    lives in taxonomy/agreement/.)"""
    folder = Path(folder)
    if folder.is_file():
        return [folder]
    if not folder.is_dir():
        raise UserError(f"labels: {folder}: no such file or folder")
    return sorted(folder.glob("*.jsonl"))


LABEL_KEYS = ("repo", "number", "re_class", "component")


def read_labels(path: Path, required: tuple[str, ...] = LABEL_KEYS) -> list[dict]:
    """The records of one JSON-lines file, each checked to carry the `required` keys."""
    try:
        with open(path, encoding="utf-8") as f:
            out = [json.loads(line) for line in f if line.strip()]
    except OSError as e:
        raise UserError(f"labels: {path}: cannot read: {e.strerror}") from None
    except ValueError as e:
        raise UserError(f"labels: {path}: not JSON lines: {e}") from None
    for i, r in enumerate(out, 1):
        missing = [k for k in required if not isinstance(r, dict) or k not in r]
        if missing:
            raise UserError(f"labels: {path}: record {i} lacks {', '.join(missing)}")
    return out


def load_gold(folder: Path = LABELS_DIR, extra: list[dict] = ()) -> list[Example]:
    """All labeled examples; the first label wins when an issue was labeled in two files, except that a real
    record wins over a summary of the same issue. `extra` records (extra label files, corrections) come last
    and win: over a labeled issue they replace only its labels; a new issue needs its text (title and body)
    unless the snapshot has it."""
    snap = snapshot_index()
    records: dict[tuple[str, int], dict] = {}
    for path in label_files(folder):
        for r in read_labels(path):
            key = (canonical_repo(r["repo"]), int(r["number"]))
            if key not in records or ("body" in r and "text" in records[key]):
                records[key] = r
    for r in extra:
        key = (canonical_repo(r["repo"]), int(r["number"]))
        if key in records:
            records[key] = {**records[key], **{k: r[k] for k in LABEL_FIELDS if r.get(k) is not None}}
        else:
            records[key] = r
    out: list[Example] = []
    for key, r in records.items():
        if "body" in r:  # laid out as the real issue
            title, body, source = r.get("title") or "", r.get("body") or "", "real"
            created = r.get("created_at") or ""
        elif "text" in r:  # summarised by the labeler (outside the corpus)
            title, body, source = r.get("title") or "", r.get("text") or "", "external"
            created = r.get("created_at") or ""
        elif key in snap:
            title, body, source = snap[key]["title"] or "", snap[key]["body"] or "", "corpus"
            created = snap[key].get("created_at") or ""
        else:
            continue
        out.append(Example(key[0], key[1], r.get("html_url") or snap.get(key, {}).get("html_url", ""),
                           title, body, r["re_class"], r["component"], r.get("known_fix", "none"),
                           r.get("labeler", ""), r.get("reason", ""), source, str(created)[:10],
                           tuple(r.get("gh_labels") or ()), r.get("state") or snap.get(key, {}).get("state") or ""))
    return out


def correction_records(con) -> list[dict]:
    """The corrections in force in the database as label records (with the issue's text when the snapshot
    does not have it, so that an issue mined later can be learnt too)."""
    from retriage.db.queries import corrections

    out = []
    for c in corrections(con):
        r = {"repo": c["repo"], "number": c["number"], "re_class": c["re_class"], "component": c["component"],
             "known_fix": c["known_fix"], "reason": c["reason"], "labeler": f"correction by {c['corrected_by']}"}
        if (c["repo"], c["number"]) not in snapshot_index() and c.get("title") is not None:
            r.update(title=c["title"], body=c["body"] or "", html_url=c["html_url"] or "", state=c["state"] or "",
                     created_at=str(c["created_at"] or "")[:10])
        out.append(r)
    return out


def training_examples(con, labels_dir: Path = LABELS_DIR, extra_labels=(), corrections: bool = True
                      ) -> tuple[list[Example], int]:
    """The labeled set `retriage train` learns: `labels_dir`, then the extra label files, then the database's
    corrections (each later source wins for an issue it names). Returns the examples and how many corrections
    were used."""
    extra = [r for p in extra_labels for r in read_labels(p)]
    fixes = correction_records(con) if corrections and con is not None else []
    return load_gold(labels_dir, extra + fixes), len(fixes)


def _by_repository(examples: list[Example]) -> list[list[Example]]:
    """The examples per repository and form of record (in that order), each group by issue number."""
    by_repo: dict[tuple[str, str], list[Example]] = {}
    for e in examples:
        by_repo.setdefault((e.repo, e.source), []).append(e)
    return [sorted(by_repo[k], key=lambda e: e.number) for k in sorted(by_repo)]


def split(examples: list[Example], dev_share: float = DEV_SHARE) -> tuple[list[Example], list[Example]]:
    """Per repository, the newest `dev_share` of its labeled issues (by issue number, which GitHub assigns in
    time order) form the dev split; training never sees them. Corpus issues and issues summarised from outside
    the corpus are cut separately, so that both kinds of text appear on both sides."""
    train, dev = [], []
    for items in _by_repository(examples):
        cut = len(items) - int(round(len(items) * dev_share))
        train += items[:cut]
        dev += items[cut:]
    return train, dev


def fold_numbers(examples: list[Example], n_folds: int = 4, dev_share: float = DEV_SHARE) -> list[int]:
    """Each example's blocked fold, for choosing settings: 0 for the dev split (`split`), 1 to `n_folds - 1` for
    the stretches of consecutive issue numbers the training side is cut into per repository (and form of record).
    Every fold is thus a stretch of time of every repository, as the issues a model meets later are, and together
    the folds cover the labeled set once: scikit-learn's PredefinedSplit takes the numbers as its `test_fold`
    (a fold is scored on its issues with a fit on every other labeled issue)."""
    train, dev = split(examples, dev_share)
    fold = {e.key: 0 for e in dev}
    blocks = max(n_folds - 1, 1)
    for items in _by_repository(train):
        for j, e in enumerate(items):
            fold[e.key] = 1 + j * blocks // len(items)
    return [fold[e.key] for e in examples]
