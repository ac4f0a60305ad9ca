"""Issue references: `vllm#7472`, `llama.cpp#3825`, `trtllm#1458`, `owner/name#N`, or an issue/PR URL."""

from __future__ import annotations

import re

from retriage.core.errors import UsageError
from retriage.taxonomy import canonical_repo, engine_by_alias, engines

_URL_RE = re.compile(r"^(?:https?://)?(?:www\.)?github\.com/([\w.-]+/[\w.-]+)/(?:issues|pull)/([0-9]+)(?:[/?#].*)?$")
_REF_RE = re.compile(r"^([\w./-]+?)\s*#\s*([0-9]+)$")
MAX_NUMBER = 2**31 - 1  # the store's INTEGER issue numbers


def _number(digits: str, ref: str) -> int:
    n = int(digits) if len(digits) <= 10 else MAX_NUMBER + 1
    if not 1 <= n <= MAX_NUMBER:
        raise UsageError(f"issue number in {ref[:60]!r} must be from 1 to {MAX_NUMBER:,}")
    return n


def parse_ref(ref: str) -> tuple[str, int]:
    """-> (owner/name, number). Raises UsageError with the accepted forms on anything else."""
    text = ref.strip()
    m = _URL_RE.match(text)
    if m:
        return canonical_repo(m.group(1)), _number(m.group(2), ref)
    m = _REF_RE.match(text)
    if m:
        name, number = m.group(1), _number(m.group(2), ref)
        if "/" in name:
            return canonical_repo(name), number
        engine = engine_by_alias(name)
        if engine:
            return engine.repo, number
        known = ", ".join(e.id for e in engines())
        raise UsageError(f"unknown engine {name[:60]!r} in {ref[:80]!r}: use one of {known}, or owner/name#N")
    raise UsageError(f"cannot read issue reference {ref[:80]!r}: use e.g. vllm#7472, owner/name#N or an issue URL")


def format_ref(repo: str, number: int) -> str:
    for e in engines():
        if e.repo == repo:
            return f"{e.id}#{number}"
    return f"{repo}#{number}"
