"""A matched rule as the fix shown for one engine: that engine's steps (with the values quoted from the log),
and only the caveats and sources that are about that engine or about none in particular.

A caveat is about an engine when it names it ("vLLM: ...", "SGLang's docs ...") or spells a flag that only
another engine's steps of the same rule use; a source is about an engine when it lives in that engine's
repository or documentation. With the engine unknown, everything is kept.
"""

from __future__ import annotations

import re

from retriage.core.rules import Match, Rule, applies_to, default_rules

ENGINE_NAMES = {
    "vllm": re.compile(r"\bvLLM\b"),
    "sglang": re.compile(r"\bSGLang\b", re.I),
    "llama.cpp": re.compile(r"\bllama(\.cpp|-server)\b", re.I),
    "trtllm": re.compile(r"\b(TensorRT-LLM|TRT-LLM|trtllm)\b", re.I),
}
SOURCE_HOMES = {
    "vllm": ("github.com/vllm-project/", "docs.vllm.ai"),
    "sglang": ("github.com/sgl-project/", "docs.sglang.ai"),
    "llama.cpp": ("github.com/ggml-org/llama.cpp", "github.com/ggerganov/llama.cpp"),
    "trtllm": ("github.com/NVIDIA/TensorRT-LLM", "nvidia.github.io/TensorRT-LLM", "github.com/triton-inference-server/"),
}
_FLAG_RE = re.compile(r"`(--?[A-Za-z][\w.-]*)")


_NUMBERED = re.compile(r"^\s*(?:\(\d+\)|\d+[.)])\s+")  # a step that carries its own number, e.g. "(1) Lower …"


def unnumbered(step: str) -> str:
    """A step without the number it carries in the rule file: every renderer numbers the steps once itself."""
    return _NUMBERED.sub("", step)


def source_engine(url: str) -> str | None:
    for engine, homes in SOURCE_HOMES.items():
        if any(h in url for h in homes):
            return engine
    return None


def _flags(steps: list[str]) -> set[str]:
    return {f for s in steps for f in _FLAG_RE.findall(s)}


def caveat_engines(rule: Rule, caveat: str) -> set[str]:
    """The engines a caveat is about (empty: about none in particular)."""
    named = {e for e, rx in ENGINE_NAMES.items() if rx.search(caveat)}
    flags = set(_FLAG_RE.findall(caveat))
    if flags:
        for engine, steps in rule.steps.items():
            if engine == "default":
                continue
            others = set().union(*[_flags(v) for k, v in rule.steps.items() if k not in (engine, "default")])
            if flags & (_flags(steps) - others):
                named.add(engine)
    return named


def for_engine(rule: Rule, engine: str | None) -> tuple[list[str], list[str]]:
    """(caveats, sources) of the rule that hold for this engine."""
    if not engine:
        return list(rule.caveats), list(rule.sources)
    caveats = [c for c in rule.caveats if (about := caveat_engines(rule, c)) == set() or engine in about]
    sources = [s for s in rule.sources if source_engine(s) in (None, engine)]
    return caveats, sources


def fix(m: Match, engine: str | None, line: str | None = None) -> dict:
    """The fix entry of the JSON answer (README, "classify")."""
    r = m.rule
    caveats, sources = for_engine(r, engine)
    return {"id": r.id, "tag": r.tag, "title": r.title, "re_class": r.re_class, "component": r.component,
            "steps": [unnumbered(x) for x in r.steps_for(engine, m.values)], "caveats": caveats, "sources": sources,
            "line": line if line is not None else m.line, "values": dict(m.values)}


def tag_fix(tag: str, engine: str | None) -> dict | None:
    """The fix entry of the first rule with this tag that applies to the engine (its steps, caveats, sources), for a
    fix tag no rule matched (the model's fix head gave it); None when no rule gives the tag."""
    for rule in default_rules()[0]:
        if rule.tag == tag and applies_to(rule, engine):
            entry = fix(Match(rule, ""), engine)
            entry["line"] = None
            return entry
    return None


def issue_advice(issue: dict, known_fixes: list[str] | None, limit: int = 3) -> list[dict]:
    """The fix advice on a stored issue (its repo, title and body), as the bot gives it: the fix entries of the
    first `limit` matching rules that apply to its engine (`source` "rule"); where none matched, the entry of the
    first of `known_fixes` a rule gives (the model's fix head named it: `source` "model")."""
    from retriage.core.document import document
    from retriage.taxonomy import engine_for_repo

    e = engine_for_repo(issue["repo"])
    engine = e.id if e else None
    matched = [m for m in document(issue.get("title"), issue.get("body")).matches if applies_to(m.rule, engine)]
    if matched:
        return [dict(fix(m, engine), source="rule") for m in matched[:limit]]
    for tag in known_fixes or []:
        entry = tag_fix(tag, engine)
        if entry is not None:
            return [dict(entry, source="model")]
    return []
