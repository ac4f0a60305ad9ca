"""A Document: one issue (or pasted log) prepared once. Every consumer — the classifier's features, the known
fixes, evidence and rendering — reads it; nothing cleans the text or matches the rules a second time.

- `lines`: the report's lines, cleaned (textprep.clean_lines); `key_lines`: exception, error and last frame lines;
- the texts the classifier reads (`full`, `keys`, `title`: the embedded views; `lexical`: keywords and TF-IDF);
- `matches`: every known-fix rule that matches the lexical text, in priority order (rules.match_rules).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from retriage.core.rules import Match, applies_to, match_rules
from retriage.core.textprep import clean_lines, key_lines, prepare_lines

MAX_KEYS_CHARS = 1500
MAX_TITLE_CHARS = 300
MAX_LEXICAL_CHARS = 60000


@dataclass(frozen=True)
class Document:
    full: str  # what MiniLM reads first: title, key lines, prose
    keys: str  # title and key lines only
    title: str  # the title alone (for a pasted log: its last error line)
    lexical: str  # the whole cleaned text, for keywords, TF-IDF and the rules
    lines: tuple[str, ...] = field(default=(), compare=False, repr=False)
    key_lines: tuple[str, ...] = field(default=(), compare=False, repr=False)
    matches: tuple[Match, ...] = field(default=(), compare=False, repr=False)

    def fixes(self, engine: str | None = None) -> list[str]:
        """Fix tags of the matching rules that apply to this engine, in priority order, without `none`."""
        tags: list[str] = []
        for m in self.matches:
            if applies_to(m.rule, engine) and m.rule.tag != "none" and m.rule.tag not in tags:
                tags.append(m.rule.tag)
        return tags


def document(title: str | None, body: str | None, matches: tuple[Match, ...] | None = None) -> Document:
    """The document of an issue (title and body) or of a log. `matches`: the rule matches when the caller
    has them already (a pasted log is matched on its own lines)."""
    title = (title or "").strip()
    lines = clean_lines(body or "")
    keys = key_lines(lines)
    lexical = (title + "\n" + "\n".join(lines))[:MAX_LEXICAL_CHARS]
    return Document(
        full=prepare_lines(title, lines, keys),
        keys=("\n".join([title] + keys))[:MAX_KEYS_CHARS],
        title=title or (keys[-1] if keys else (lines[0] if lines else ""))[:MAX_TITLE_CHARS],
        lexical=lexical,
        lines=tuple(lines), key_lines=tuple(keys),
        matches=tuple(match_rules(lexical.split("\n"))) if matches is None else tuple(matches),
    )
