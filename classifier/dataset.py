"""The labeled set: gold labels from taxonomy/labels/*.jsonl joined with issue texts, and the dev split.

Records of the bundled corpus carry only labels; their title and body come from the snapshot. Records found
elsewhere (TensorRT-LLM, issues outside the corpus) carry the labeler's own title and summary.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

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

    @property
    def key(self) -> tuple[str, int]:
        return (self.repo, self.number)


@lru_cache(maxsize=1)
def snapshot_index() -> dict[tuple[str, int], dict]:
    folder = resources.files("retriage").joinpath("data", "snapshot")
    out = {}
    for f in sorted(folder.iterdir(), key=lambda p: p.name):
        if f.name.endswith(".jsonl.gz"):
            with gzip.open(str(f), "rt", encoding="utf-8") as fh:
                for line in fh:
                    r = json.loads(line)
                    out[(canonical_repo(r["repo"]), r["number"])] = r
    return out


def label_files(folder: Path = LABELS_DIR) -> list[Path]:
    """The label files. (The second reader's sample for the agreement study lives in taxonomy/agreement/.)"""
    return sorted(Path(folder).glob("*.jsonl"))


def read_labels(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_gold(folder: Path = LABELS_DIR) -> list[Example]:
    """All labeled examples, first label wins when an issue was labeled in two files."""
    snap = snapshot_index()
    seen: set[tuple[str, int]] = set()
    out: list[Example] = []
    for path in label_files(folder):
        for r in read_labels(path):
            key = (canonical_repo(r["repo"]), int(r["number"]))
            if key in seen:
                continue
            if "text" in r:  # summarised by the labeler (outside the corpus)
                title, body, source = r.get("title") or "", r.get("text") or "", "external"
            elif key in snap:
                title, body, source = snap[key]["title"] or "", snap[key]["body"] or "", "corpus"
            else:
                continue
            seen.add(key)
            out.append(Example(key[0], key[1], r.get("html_url") or snap.get(key, {}).get("html_url", ""),
                               title, body, r["re_class"], r["component"], r.get("known_fix", "none"),
                               r.get("labeler", ""), r.get("reason", ""), source))
    return out


def split(examples: list[Example], dev_share: float = DEV_SHARE) -> tuple[list[Example], list[Example]]:
    """Per repository, the newest `dev_share` of its labeled issues (by issue number, which GitHub assigns in
    time order) form the dev split; training never sees them. Corpus issues and issues summarised from outside
    the corpus are cut separately, so that both kinds of text appear on both sides."""
    by_repo: dict[tuple[str, str], list[Example]] = {}
    for e in examples:
        by_repo.setdefault((e.repo, e.source), []).append(e)
    train, dev = [], []
    for repo in sorted(by_repo):
        items = sorted(by_repo[repo], key=lambda e: e.number)
        cut = len(items) - int(round(len(items) * dev_share))
        train += items[:cut]
        dev += items[cut:]
    return train, dev
