"""The bot's comment: a Verdict -> GitHub Markdown, or None when nothing is worth saying.

What it says depends on the thresholds (taxonomy/bot.toml), chosen for precision:
- at or above the class threshold (a resource class, not abstained): the class and the component (the component
  only above its own threshold), the known fix with this engine's exact flags (the first matching rule's steps;
  where no rule matched, the model's fix tag above its threshold), the evidence lines quoted as code, and the
  similar past issues above the similarity threshold: state, whether a fixing pull request is linked, the fix
  recorded for it; evidence is only machine lines that carry the failure (not the title, not prose, not INFO lines);
- a regression the reporter named (bisected to a change, or worked in X and fails in Y) leads the comment, and then
  no generic fix steps follow;
- below it: only the fix of a rule that matched, with the line that matched; or nothing (None).
Every piece of issue text goes through retriage/bot/safe.py. The comment starts with the hidden marker (how
miner/publish.py finds it again) and ends with one short provenance line; nothing in it is written for the team
(no model hash, thresholds, "also matches" or caveats about the labeling guide).
"""

from __future__ import annotations

import re

from retriage.bot import safe
from retriage.bot.config import BotConfig
from retriage.bot.verdict import Verdict
from retriage.core.refs import format_ref
from retriage.taxonomy import engines, re_classes

GITHUB_URL_PREFIX = "https://github.com/"
TEAM_WORDS = re.compile(r"\b(?:guide|labell?ing|labell?ed|RE\.\d)\b|\bPer the\b", re.I)  # team-phrased caveats


def _engine_name(engine: str | None) -> str | None:
    return next((e.name for e in engines() if e.id == engine), None)


def _class_name(re_class: str) -> str:
    return next((t.name for t in re_classes() if t.id == re_class), re_class)


def states_class(v: Verdict, cfg: BotConfig) -> bool:
    r = v.result
    return r.re_class != "none" and not r.abstained and r.re_confidence >= cfg.class_confidence


def _class_section(v: Verdict, cfg: BotConfig) -> str:
    r = v.result
    text = (f"**Likely root cause: {r.re_class} — {_class_name(r.re_class)}** "
            f"(confidence {r.re_confidence:.2f})")
    if r.component_confidence >= cfg.component_confidence:
        text += f" · component {safe.code_span(r.component)} ({r.component_confidence:.2f})"
    return text


def _for_maintainers(caveat: str) -> bool:
    """A caveat that speaks to a maintainer: not the team's reasoning about its labels ("Per the guide this is RE.3
    because ...")."""
    return not TEAM_WORDS.search(caveat)


def _regression_section(regression: dict) -> str:
    """A regression the reporter named (bisected to a change, or worked in one version and not the next): what to
    do first (triage/regression.py; the change or the versions are in it)."""
    return f"**Regression** — {safe.clean(regression['step'])}"


def evidence_lines(v: Verdict) -> list[str]:
    """What the comment quotes: machine lines that carry the failure (core/textprep.failure_lines), never the
    issue's title, the reporter's prose, an INFO line or our own notes ("regression: ...", "environment: ...")."""
    from retriage.core.textprep import failure_lines

    title = (v.title or "").strip()
    ours = ("regression: ", "environment: ")
    return [x for x in failure_lines([e for e in v.result.evidence if not e.startswith(ours)])
            if x != title and x not in title]


def _fix_section(fix: dict, engine: str | None, cfg: BotConfig, heading: str) -> str:
    lines = [f"**{heading}** — {safe.inline(fix['title'], 200)} (rule {safe.code_span(fix['id'])}, "
             f"fix {safe.code_span(fix['tag'])})", ""]
    for n, step in enumerate(fix["steps"][: cfg.max_steps], 1):
        lines.append(f"{n}. {safe.clean(' '.join(step.split()))}")
    for caveat in [c for c in fix["caveats"] if _for_maintainers(c)][:2]:  # this engine's only (triage/fixtext)
        lines.append(f"\n> {safe.clean(' '.join(caveat.split()))}")
    repo = next((e.repo for e in engines() if e.id == engine), None)
    links = [s for s in fix["sources"] if s.startswith("https://")]
    own = [s for s in links if repo and f"github.com/{repo}/" in s]
    sources = (own or links)[:3]
    if sources:
        lines.append("\nSources: " + " · ".join(f"<{s}>" for s in sources))
    return "\n".join(lines)


def _evidence_section(lines: list[str], cfg: BotConfig) -> str:
    shown = lines[: cfg.max_evidence_lines]
    return "**Evidence** (lines of the report):\n\n" + safe.code_block(shown, cfg.max_line_chars)


def _link(s: dict) -> str:
    ref = format_ref(s["repo"], s["number"])  # engine id or owner/name, and a number: no markup
    if not all(ch.isalnum() or ch in "._-/#" for ch in ref):
        ref = safe.inline(ref)
    url = s.get("html_url") or ""
    return f"[{ref}]({url})" if url.startswith(GITHUB_URL_PREFIX) and " " not in url and ")" not in url else ref


def _similar_section(rows: list[dict]) -> str:
    out = ["**Similar past issues**", "", "| issue | state | similarity | fixing PR linked | recorded fix |",
           "| --- | --- | --- | --- | --- |"]
    for s in rows:
        prs = s.get("fixed_by") or []
        linked = "yes (" + ", ".join(f"#{safe.ZWJ}{n}" for n in prs[:3]) + ")" if prs else "no"
        fix = (f"{safe.code_span(s['recorded_fix'])} ({s.get('recorded_by') or 'recorded'})"
               if s.get("recorded_fix") else "-")
        out.append(f"| {_link(s)} {safe.inline(s.get('title'), 90)} | {safe.inline(s.get('state') or '-')} | "
                   f"{s['score']:.2f} | {linked} | {fix} |")
    return "\n".join(out)


PROVENANCE = "<sub>retriage, from this issue's text · advice only · this comment is updated, not repeated</sub>"


def render_comment(v: Verdict, cfg: BotConfig) -> str | None:
    """The comment's Markdown, or None when nothing is above the thresholds. A regression the reporter named
    leads, and then no generic fix steps follow (the change, not memory, is what to look at first)."""
    r = v.result
    stated = states_class(v, cfg)
    engine = _engine_name(r.engine)
    regression = getattr(r, "regression", None)
    sections: list[str] = []
    if regression:
        sections.append(_regression_section(regression))
    if stated:
        sections.append(_class_section(v, cfg))
    heading = f"Known fix for {engine}" if engine else "Known fix"
    if regression:  # the change, not memory or flags, is what to look at first
        pass
    elif r.fixes:
        sections.append(_fix_section(r.fixes[0], r.engine, cfg, heading))
    elif stated and v.head_fix and v.head_fix_confidence >= cfg.fix_head_confidence:
        sections.append(_fix_section(v.head_fix, r.engine, cfg,
                                     f"Possible fix (the model's, confidence {v.head_fix_confidence:.2f}; "
                                     f"no rule matched)"))
    if not sections:
        return None
    if stated:
        evidence = evidence_lines(v)
    else:  # only the fix: the lines its rules matched
        evidence = [f["line"].strip() for f in r.fixes if f.get("line")]
    if evidence:
        sections.append(_evidence_section(evidence, cfg))
    similar = [s for s in r.similar if s["score"] >= cfg.similar_score][: cfg.max_similar] if stated else []
    if similar:
        sections.append(_similar_section(similar))
    header = f"{cfg.marker}\n### retriage: automated triage" + (f" of {engine} issue" if engine and v.ref else "")
    body = safe.cap([header] + sections, cfg.max_chars - 400, "_(cut to fit the comment length limit)_")
    return body + "\n\n" + PROVENANCE + "\n"
