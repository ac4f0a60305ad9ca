"""Results of `retriage eval` remembered on disk, keyed by a hash of everything they depend on.

A refit on a split's training side, a baseline, the shipped model's predictions on the dev split: each is a
pure function of the labeled issues' raw text and labels, the settings, and the code and data files that turn
text into answers. The key hashes all of them — the issues as they are read from the label files, the
settings, and a fingerprint of the package's classifier, core and taxonomy files — so a repeated `eval` with
nothing changed reads its answers back, and any change to a label, a text, a rule or the code computes them
anew. Entries live in `cache_dir()/results/`; an entry that cannot be read or written is recomputed.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from functools import lru_cache
from pathlib import Path
from typing import Callable, TypeVar

from retriage.core.paths import cache_dir

T = TypeVar("T")
_SUFFIXES = (".py", ".toml", ".npz", ".json", ".txt")


@lru_cache(maxsize=1)
def fingerprint() -> str:
    """A hash of the source and data files of the classifier, core and taxonomy folders (label files included,
    shipped model included)."""
    import retriage.classifier
    import retriage.core
    import retriage.taxonomy

    h = hashlib.sha256()
    for package in (retriage.classifier, retriage.core, retriage.taxonomy):  # what turns a text into an answer
        root = Path(package.__path__[0])
        h.update(package.__name__.encode())
        for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith(_SUFFIXES) or name.endswith(".jsonl"):
                    path = Path(dirpath) / name
                    h.update(str(path.relative_to(root)).encode())
                    h.update(path.read_bytes())
    return h.hexdigest()[:24]


def examples_material(examples) -> list[str]:
    """What a list of labeled examples contributes to a key: a digest of each one's identity, raw text and labels."""
    return [hashlib.sha256(json.dumps([e.repo, e.number, e.title, e.body, e.re_class, e.component, e.known_fix],
                                      ensure_ascii=False).encode("utf-8", "replace")).hexdigest()[:32]
            for e in examples]


def key_of(kind: str, material) -> str:
    h = hashlib.sha256(kind.encode())
    h.update(fingerprint().encode())
    h.update(json.dumps(material, ensure_ascii=False, sort_keys=True).encode("utf-8", "replace"))
    return h.hexdigest()[:32]


def remember(kind: str, material, compute: Callable[[], T], valid: Callable[[object], bool]) -> T:
    """`compute()`, or its earlier answer for the same `kind` and `material` (JSON-able). `valid` checks an
    entry read back (shape and types); an entry it refuses is computed again and replaced."""
    path = cache_dir() / "results" / f"{kind}-{key_of(kind, material)}.json"
    try:
        out = json.loads(path.read_text(encoding="utf-8"))
        if valid(out):
            return out
    except (OSError, ValueError):
        pass
    out = compute()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(out, ensure_ascii=False), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass
    return out


def is_str_list(x, n: int | None = None) -> bool:
    return isinstance(x, list) and all(isinstance(v, str) for v in x) and (n is None or len(x) == n)


def is_answers(x, n: int, keys: tuple[str, ...]) -> bool:
    """A dict of per-issue answer lists, each of length n (lists of strings, of string lists, of bools, or of
    finite numbers such as confidences)."""
    if not isinstance(x, dict) or set(x) != set(keys):
        return False
    for k in keys:
        v = x[k]
        if not isinstance(v, list) or len(v) != n:
            return False
        if not all(isinstance(a, (str, bool)) or (isinstance(a, float) and math.isfinite(a))
                   or (isinstance(a, list) and all(isinstance(b, str) for b in a)) for a in v):
            return False
    return True
