"""Tokens for the lexical index: words as a search box expects them, and code-ish text kept findable.

Paths (`/dev/shm`), flags (`--gpu-memory-utilization`, `-ngl`), identifiers (`CUDA_ERROR_OUT_OF_MEMORY`) and
dotted names (`torch.cuda.OutOfMemoryError`) are kept whole *and* split into their words (CamelCase too), so
`shm`, `out of memory` and the exact string all find them, the exact string scoring highest. Numbers become
`<num>` and hex addresses or hashes `<hex>` (so two logs that differ only in sizes, ranks, PIDs and addresses
read the same); versions (`0.6.3`) are kept. Long file paths keep their last two parts (`worker/model_runner.py`)
rather than the machine's prefix (`/usr/local/lib/python3.10/site-packages/...`), and an absolute path its first two
(`/dev/shm/nccl-x1` is also `/dev/shm`). Stopwords are dropped
(`taxonomy/stopwords.txt`). The same function reads issues and queries.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from importlib import resources

NUM, HEX = "<num>", "<hex>"
MAX_PATH_PARTS = 4  # a path of up to this many parts is also kept whole

_TOKEN_RE = re.compile(  # one scan; the most common case first (a URL reads as a relative path of its words)
    r"[A-Za-z_][\w-]*(?:[./][\w@+-]+)*"                       # word, identifier, dotted name, relative path
    r"|(?<![\w/-])--?[A-Za-z][\w-]*"                           # a flag
    r"|(?<![\w/.~])(?:~|\.{1,2})?/[\w.@+-]+(?:/[\w.@+-]+)*"    # a path
    r"|0[xX][0-9a-fA-F]+"                                      # an address
    r"|\d+(?:\.\d+)*[A-Za-z_]*\w*"                              # a number, a version, a hash
)
_PART_RE = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+|[a-z]+")  # words of an identifier, CamelCase split
_HEXISH_RE = re.compile(r"^(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}$")
_SITE_RE = re.compile(r"^.*?/(?:site|dist)-packages/")
_DIGITS_RE = re.compile(r"\d+")


@lru_cache(maxsize=1)
def stopwords() -> frozenset[str]:
    text = resources.files("retriage.taxonomy").joinpath("stopwords.txt").read_text(encoding="utf-8")
    return frozenset(w.strip() for w in text.splitlines() if w.strip() and not w.startswith("#"))


def _word(w: str, out: list[str], stop: frozenset[str]) -> None:
    """A plain word (already lowercase, no separators)."""
    if w.isdigit():
        out.append(NUM)
    elif _HEXISH_RE.match(w):
        out.append(HEX)
    elif len(w) > 1 and w not in stop:
        out.append(w)


def _parts(raw: str, out: list[str], stop: frozenset[str]) -> None:
    """The words inside a compound token, CamelCase split; a part that is the whole token is not repeated."""
    parts = _PART_RE.findall(raw)
    if len(parts) > 1 and len(raw) >= 6:
        for p in parts:
            _word(p.lower(), out, stop)


def _path(raw: str, out: list[str], stop: frozenset[str]) -> None:
    head = [s for s in raw.split("/") if s]
    if raw.startswith("/") and len(head) > 2 and (raw.startswith("/dev/") or not _SITE_RE.match(raw)):
        out.append(_DIGITS_RE.sub("#", "/" + "/".join(head[:2]).lower()))  # /dev/shm/nccl-x1 is also /dev/shm
        if len(head) > MAX_PATH_PARTS:  # (a shorter path gives the words of every part below)
            for w in head[:2]:
                _word(w.lower(), out, stop)
    p = _SITE_RE.sub("", raw).rstrip("/.")
    segs = [s for s in p.split("/") if s]
    if not segs:
        return
    whole = _DIGITS_RE.sub("#", p.lower())
    out.append(whole if len(segs) <= MAX_PATH_PARTS else _DIGITS_RE.sub("#", "/".join(segs[-2:]).lower()))
    for s in segs[-MAX_PATH_PARTS:]:
        for w in re.split(r"[\W_]+", s):
            if w:
                _word(w.lower(), out, stop)
                _parts(w, out, stop)


@lru_cache(maxsize=500_000)
def _expand(raw: str) -> tuple[str, ...]:
    """The tokens one raw match stands for (memoised: the same raw strings recur across issues)."""
    stop = stopwords()
    out: list[str] = []
    append = out.append
    if raw.isalpha() and (raw.islower() or raw.isupper() or raw.istitle()):  # most tokens: a plain word
        low = raw.lower()
        return (low,) if len(raw) > 1 and low not in stop else ()
    c = raw[0]
    if c.isdigit():
        if raw.isdigit():
            append(NUM)
        elif c == "0" and raw[1:2] in ("x", "X"):
            append(HEX)
        elif raw.count(".") >= 2 and raw.replace(".", "").isdigit():
            append(raw)  # a version
        elif "." in raw:
            append(NUM)
        else:
            _word(raw.lower(), out, stop)  # 12abc, a hash
    elif c == "-":
        append(raw.lower().rstrip("-"))
        _parts(raw, out, stop)
    elif "/" in raw:
        _path(raw, out, stop)
    elif "." in raw:
        append(_DIGITS_RE.sub("#", raw.lower()))
        for w in raw.split("."):
            if w:
                _word(w.lower(), out, stop)
                _parts(w, out, stop)
    else:  # an identifier: CUDA_ERROR_OUT_OF_MEMORY, OutOfMemoryError, non-zero, h100
        _word(raw.lower(), out, stop)
        for w in re.split(r"[_-]+", raw):
            if w and w != raw:
                _word(w.lower(), out, stop)
            _parts(w, out, stop)
    return tuple(out)


def tokenize(text: str) -> list[str]:
    """The tokens of `text`, in order (repeats kept)."""
    out: list[str] = []
    for raw in _TOKEN_RE.findall(text or ""):
        out.extend(_expand(raw))
    return out


def token_counts(text: str) -> Counter:
    """How often each token occurs in `text` (what BM25 reads): the same as Counter(tokenize(text)), faster."""
    counts: Counter = Counter()
    for raw, n in Counter(_TOKEN_RE.findall(text or "")).items():
        for tok in _expand(raw):
            counts[tok] += n
    return counts
