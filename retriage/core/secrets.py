"""One redaction step for every text that leaves retriage: terminal, JSON, CSV, the database, comments.

`redact(text)` masks, as `***`:
- the secrets in use: the values of GH_TOKEN, GITHUB_TOKEN, HF_TOKEN, HUGGING_FACE_HUB_TOKEN and
  OPENAI_API_KEY, and any secret passed to `register` (the miner registers the token it sends). A secret is
  found in any letter case, inside its base64 form (at any alignment, standard or URL-safe alphabet), and
  in part: any 12 characters of it in a row (with at least 6 different ones: a run of zeros is not a token)
  mask the whole run of token characters around them;
- any token-shaped string, known or not: GitHub (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`),
  Hugging Face (`hf_`), OpenAI (`sk-`) and AWS access keys (`AKIA`, `ASIA`), also with a Markdown escape
  (`ghp\\_...`) inside.

Callers run it on raw text before cutting or escaping it, and the CLI's standard output and error pass it
once more, last (retriage.cli), so a text that went through neither is still masked.
"""

from __future__ import annotations

import base64
import os
import re
from functools import lru_cache

MASK = "***"
SECRET_VARS = ("GH_TOKEN", "GITHUB_TOKEN", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "OPENAI_API_KEY")
WINDOW = 12  # a run this long of a secret's characters is taken as the secret
_SHORTEST = 6  # secrets shorter than this are not searched for (they would mask ordinary words)

_SHAPED = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"gh[pousr]\\?_[A-Za-z0-9]{20,}"
    r"|github\\?_pat\\?_[A-Za-z0-9_\\]{20,}"
    r"|hf\\?_[A-Za-z0-9]{20,}"
    r"|sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r")")
_TOKEN_CHAR = re.compile(r"[A-Za-z0-9_+=\\-]")  # not "/": a token in a path masks only its segment

_registered: set[str] = set()


def register(secret: str | None) -> None:
    """Mask `secret` in everything from now on (a token given by other means than the environment)."""
    if secret and len(secret.strip()) >= _SHORTEST:
        _registered.add(secret.strip())


def secrets_in_use() -> frozenset[str]:
    found = {os.environ.get(name, "").strip() for name in SECRET_VARS} | _registered
    return frozenset(s for s in found if len(s) >= _SHORTEST)


def _base64_cores(secret: str) -> list[str]:
    """The part of the base64 of `secret` that is the same wherever it sits in the encoded text."""
    raw = secret.encode()
    cores = []
    for lead in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(b"\0" * lead + raw).decode().rstrip("=")
            core = text[4 if lead else 0: len(text) - 4]
            if len(core) >= WINDOW:
                cores.append(core)
    return cores


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_DISTINCT = 6  # a window counts only with this many different characters (a random token's all have)
_CHUNK = WINDOW // 2  # every WINDOW characters of a secret hold one of its CHUNK-aligned pieces whole


@lru_cache(maxsize=8)
def _forms(secrets: frozenset[str]) -> tuple[tuple[str, ...], frozenset[str], tuple[str, ...]]:
    """(pieces to look for, the WINDOW-long runs that prove a long secret, short secrets), all lower case."""
    pieces: set[str] = set()
    windows: set[str] = set()
    short: set[str] = set()
    for secret in secrets:
        for form in [secret, *_base64_cores(secret)]:
            form = form.translate(_ASCII_LOWER)
            if len(form) < WINDOW:
                short.add(form)
                pieces.add(form)
                continue
            pieces.update(form[i:i + _CHUNK] for i in range(0, len(form) - _CHUNK + 1, _CHUNK))
            # a run such as 000000000000 says nothing of which secret it is, and numbers in issue text hold it
            windows.update(w for w in (form[i:i + WINDOW] for i in range(len(form) - WINDOW + 1))
                           if len(set(w)) >= _DISTINCT)
    return tuple(sorted(pieces)), frozenset(windows), tuple(sorted(short))


def _run_around(text: str, start: int, end: int) -> tuple[int, int]:
    while start > 0 and _TOKEN_CHAR.match(text[start - 1]):
        start -= 1
    while end < len(text) and _TOKEN_CHAR.match(text[end]):
        end += 1
    return start, end


def _mask_secrets(text: str, secrets: frozenset[str]) -> str:
    """Each run of token characters that holds a secret (or WINDOW characters of one) masked whole. The
    pieces are found with str.find (C speed); only the runs around a hit are checked further."""
    pieces, windows, short = _forms(secrets)
    low = text.translate(_ASCII_LOWER)  # same length as text: ASCII letters only
    spans = []
    for piece in pieces:
        at = low.find(piece)
        while at >= 0:
            start, end = _run_around(low, at, at + len(piece))
            run = low[start:end]
            if any(s in run for s in short) or any(run[i:i + WINDOW] in windows
                                                   for i in range(len(run) - WINDOW + 1)):
                spans.append((start, end))
            at = low.find(piece, max(end, at + 1))
    if not spans:
        return text
    spans.sort()
    merged = [spans[0]]
    for start, end in spans[1:]:
        if start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    out, last = [], 0
    for start, end in merged:
        out.append(text[last:start])
        out.append(MASK)
        last = end
    out.append(text[last:])
    return "".join(out)


def redact(text):
    """`text` with every secret in use and every token-shaped string masked (non-strings pass unchanged)."""
    if not isinstance(text, str) or not text:
        return text
    secrets = secrets_in_use()
    if secrets:
        text = _mask_secrets(text, secrets)
    return _SHAPED.sub(MASK, text)


def redact_all(obj):
    """`redact` on every string inside lists, tuples and dicts (keys too)."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {redact_all(k): redact_all(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(redact_all(v) for v in obj) if isinstance(obj, list) else tuple(redact_all(v) for v in obj)
    return obj
