"""The known-fix rules (taxonomy/rules.toml): loading and matching.

File order is priority: the first rule that matches is the primary answer. Patterns are searched
case-insensitively in each line of a normalised log (as patterns for lowercased text: core/folded.py); a
rule with a not_pattern that matches anywhere does not apply. Each match keeps the line that matched, shown as
evidence.

A rule may name values to read from the log (`captures`: name -> regexes with one group, tried in order over the
original text, case-insensitively); its steps quote them as `{name}` or `{name|text when not found}`, so that
an answer can say "`--max-model-len 5632`" when the engine printed that estimate.

A rule may also read the facts parsed from the log (triage/evidence.py: "collective_crash", "low_prefix_reuse"
...): `requires_evidence` (all must be shown), `excludes_evidence` (none may be shown) and `matched_by_evidence`
(any one shown matches the rule on its own, the fact's phrase as the evidence line). Without facts (None) these
are not read.
"""

from __future__ import annotations

import bisect
import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from retriage.core.folded import compile_folded, fold
from retriage.taxonomy import HERE as TAXONOMY_DIR
from retriage.taxonomy import component_ids, fix_tag_ids, re_class_ids

RULES_FILE = TAXONOMY_DIR / "rules.toml"


@dataclass(frozen=True)
class Rule:
    id: str
    tag: str
    title: str
    re_class: str
    component: str
    engines: tuple[str, ...]
    pattern: re.Pattern  # all patterns as one alternation, multi-line, for folded (lowercased) text
    not_pattern: re.Pattern | None  # likewise
    steps: dict = field(hash=False)
    caveats: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    captures: tuple[tuple[str, tuple[re.Pattern, ...]], ...] = ()  # (name, regexes tried in order)
    multi_device_class: str | None = None  # the class instead of re_class when the log runs several devices
    mixed_gpu_class: str | None = None  # the class instead of re_class when the machine mixes compute capabilities
    requires_evidence: tuple[str, ...] = ()  # facts that must all be shown (triage/evidence.py)
    excludes_evidence: tuple[str, ...] = ()  # facts that must not be shown
    matched_by_evidence: tuple[str, ...] = ()  # facts that match the rule on their own

    def steps_for(self, engine: str | None, values: dict | None = None) -> list[str]:
        """This engine's steps (or the default ones), placeholders filled from `values` (or their fallback)."""
        steps = self.steps.get(engine or "", self.steps.get("default", []))
        return [fill(s, values or {}) for s in steps]

    def read_values(self, text: str) -> dict[str, str]:
        """The captured values found in `text` (the original log, not folded)."""
        out = {}
        for name, regexes in self.captures:
            for rx in regexes:
                m = rx.search(text)
                if m:
                    out[name] = m.group(1).strip()
                    break
        return out


PLACEHOLDER_RE = re.compile(r"\{([a-z_][a-z0-9_]*)(?:\|([^{}]*))?\}")


def fill(step: str, values: dict) -> str:
    """`{name}` -> the captured value; `{name|fallback}` -> the value or the fallback text."""
    def sub(m: re.Match) -> str:
        if m.group(1) in values:
            return values[m.group(1)]
        return m.group(2) if m.group(2) is not None else m.group(0)

    return PLACEHOLDER_RE.sub(sub, step)


@dataclass(frozen=True)
class Match:
    rule: Rule
    line: str
    values: dict = field(default_factory=dict, hash=False, compare=False)  # captured values, by name


class RulesError(ValueError):
    pass


def _alternation(patterns: list[str]) -> re.Pattern:
    """One case-insensitive multi-line pattern to search in `fold(text)`."""
    return compile_folded("|".join(f"(?:{p})" for p in patterns), re.MULTILINE)


def load_rules(path: Path = RULES_FILE) -> tuple[list[Rule], re.Pattern]:
    """(rules in priority order, the wrapper-line pattern). Validates ids, tags, classes and regexes."""
    with open(path, "rb") as f:
        data = tomllib.load(f)
    tags, classes, comps = set(fix_tag_ids()), set(re_class_ids()), set(component_ids())
    rules, seen = [], set()
    for d in data.get("rule", []):
        rid = d.get("id")
        if not rid or rid in seen:
            raise RulesError(f"rule id missing or repeated: {rid!r}")
        seen.add(rid)
        if d["tag"] not in tags or d["re_class"] not in classes or d["component"] not in comps or \
                d.get("multi_device_class", "RE.3") not in classes or d.get("mixed_gpu_class", "RE.3") not in classes:
            raise RulesError(f"rule {rid}: unknown tag, class or component")
        if not d.get("patterns") and not d.get("matched_by_evidence"):
            raise RulesError(f"rule {rid}: no patterns")
        try:
            pat = _alternation(d.get("patterns") or ["(?!x)x"])
            notp = _alternation(d["not_patterns"]) if d.get("not_patterns") else None
        except (re.error, ValueError) as e:
            raise RulesError(f"rule {rid}: bad regex: {e}") from None
        captures = _captures(rid, d.get("captures", {}))
        steps = dict(d.get("steps", {}))
        for text in [s for v in steps.values() for s in v]:
            for m in PLACEHOLDER_RE.finditer(text):
                if m.group(1) not in dict(captures):
                    raise RulesError(f"rule {rid}: step placeholder {{{m.group(1)}}} names no capture")
        rules.append(Rule(rid, d["tag"], d["title"], d["re_class"], d["component"], tuple(d.get("engines", [])),
                          pat, notp, steps, tuple(d.get("caveats", [])),
                          tuple(d.get("sources", [])), captures, d.get("multi_device_class"),
                          d.get("mixed_gpu_class"), tuple(d.get("requires_evidence", ())),
                          tuple(d.get("excludes_evidence", ())), tuple(d.get("matched_by_evidence", ()))))
    wrappers = _alternation(data.get("wrappers", []) or ["(?!x)x"])
    return rules, wrappers


def _captures(rid: str, table: dict) -> tuple:
    out = []
    for name, regexes in table.items():
        regexes = [regexes] if isinstance(regexes, str) else list(regexes)
        compiled = []
        for r in regexes:
            try:
                rx = re.compile(r, re.IGNORECASE)
            except re.error as e:
                raise RulesError(f"rule {rid}: bad regex in capture {name}: {e}") from None
            if rx.groups != 1:
                raise RulesError(f"rule {rid}: capture {name} must have exactly one group")
            compiled.append(rx)
        out.append((name, tuple(compiled)))
    return tuple(out)


@lru_cache(maxsize=1)
def default_rules() -> tuple[list[Rule], re.Pattern]:
    return load_rules()


def applies_to(rule: Rule, engine: str | None) -> bool:
    """A rule restricted to some engines does not apply to a log of another engine (any rule applies when the
    engine is unknown)."""
    return not (engine and rule.engines and engine not in rule.engines)


def _evidence_allows(rule: Rule, facts: dict[str, str] | None) -> bool:
    if facts is None:
        return True
    return all(f in facts for f in rule.requires_evidence) and not any(f in facts for f in rule.excludes_evidence)


def match_rules(lines: list[str], engine: str | None = None, rules: list[Rule] | None = None,
                facts: dict[str, str] | None = None) -> list[Match]:
    """Every applicable rule that matches, in priority order, each with its first matching line.

    With a known engine, rules restricted to other engines are skipped. `facts` (fact name -> phrase, from
    triage/evidence.py) are read by the rules' evidence clauses (module docstring); None ignores them."""
    rules = rules if rules is not None else default_rules()[0]
    text = fold("\n".join(lines))
    starts = None
    out = []
    for rule in rules:
        if not applies_to(rule, engine) or not _evidence_allows(rule, facts):
            continue
        m = rule.pattern.search(text)
        if not m:
            shown = next((f for f in rule.matched_by_evidence if facts and f in facts), None)
            if shown:
                out.append(Match(rule, f"evidence: {facts[shown]}"))
            continue
        if rule.not_pattern is not None and rule.not_pattern.search(text):
            continue
        if starts is None:
            starts, pos = [], 0
            for ln in lines:
                starts.append(pos)
                pos += len(ln) + 1
        i = bisect.bisect_right(starts, m.start()) - 1
        values = rule.read_values(lines[i]) if rule.captures else {}
        if rule.captures and len(values) < len(rule.captures):  # not all on the matched line: the whole log
            values = {**rule.read_values("\n".join(lines)), **values}
        out.append(Match(rule, lines[i], values))
    return out


def is_wrapper(line: str) -> bool:
    return bool(default_rules()[1].search(fold(line)))
