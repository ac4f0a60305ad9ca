"""Untrusted text (an issue's title and body, other issues' titles) into a GitHub comment, safely.

- No @mention reaches the comment unbroken: a zero-width joiner goes after every `@` that starts a login or team
  (`@user`, `@org/team`), in code too; `#123` in inline text gets one as well, so a quoted title cannot
  cross-reference another issue.
- Code blocks are fenced with more backticks than the longest run of backticks inside, so nothing in them can
  close the fence; control characters and bidirectional overrides are dropped.
- Inline text is one line, HTML-escaped (`<`, `>`, `&`) and Markdown-escaped, so it cannot open a tag, a link,
  an image, a table cell or an HTML comment.
- Secrets are masked (retriage.core.secrets) on the raw text, before it is cut or escaped, and again on the
  escaped text; `cap` keeps the comment under a length.
"""

from __future__ import annotations

import html
import re

from retriage.core.secrets import redact

ZWJ = "\u200d"
_MENTION_RE = re.compile(r"@(?=[A-Za-z0-9_-])")
_REF_RE = re.compile(r"#(?=\d)")
_CONTROL_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069]")
_MARKDOWN_RE = re.compile(r"([\\`*_{}\[\]()#+!|~>-])")
_BACKTICKS_RE = re.compile(r"`+")


def break_mentions(text: str) -> str:
    return _MENTION_RE.sub("@" + ZWJ, text)


def mask_secrets(text: str) -> str:
    return redact(text)


def clean(text: str) -> str:
    """Control characters (but tab) and bidirectional overrides dropped, secrets masked, mentions broken."""
    return break_mentions(mask_secrets(_CONTROL_RE.sub("", text.replace("\r\n", "\n"))))


def inline(text: str | None, limit: int = 120) -> str:
    """Untrusted text as one line of plain Markdown: cut to `limit`, escaped, nothing it says is markup."""
    one = " ".join(_CONTROL_RE.sub(" ", mask_secrets(text or "")).split())  # masked before cut and escape
    if len(one) > limit:
        one = one[: limit - 1] + "…"
    escaped = _MARKDOWN_RE.sub(r"\\\1", html.escape(one, quote=False))
    return clean(_REF_RE.sub("#" + ZWJ, escaped))


def fence_for(text: str) -> str:
    """A backtick fence longer than any backtick run in `text` (at least three)."""
    longest = max((len(m.group()) for m in _BACKTICKS_RE.finditer(text)), default=0)
    return "`" * max(3, longest + 1)


def code_block(lines: list[str], max_line_chars: int, lang: str = "text") -> str:
    """Lines quoted verbatim (each cut to `max_line_chars`) in a fenced block nothing inside can close."""
    cut = [ln if len(ln) <= max_line_chars else ln[: max_line_chars - 1] + "…"
           for ln in (clean(x).replace("\n", " ") for x in lines)]
    body = "\n".join(cut)
    fence = fence_for(body)
    return f"{fence}{lang}\n{body}\n{fence}"


def code_span(text: str) -> str:
    """Our own short identifiers (rule ids, tags, flags) as inline code."""
    text = clean(text).replace("\n", " ")
    fence = "`" * (max((len(m.group()) for m in _BACKTICKS_RE.finditer(text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def cap(sections: list[str], max_chars: int, note: str) -> str:
    """Sections joined by blank lines; trailing sections dropped (for `note`) until the text fits `max_chars`."""
    kept = list(sections)
    text = "\n\n".join(kept)
    while len(text) > max_chars and len(kept) > 1:
        kept.pop()
        text = "\n\n".join(kept + [note])
    return text[:max_chars]
