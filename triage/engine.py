"""Which engine a log comes from, from the signals in taxonomy/engines.toml, and why."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from functools import lru_cache

from retriage.core.errors import UsageError
from retriage.taxonomy import Engine, engine_by_alias, engines


@dataclass(frozen=True)
class EngineGuess:
    engine: str | None  # engine id, None when nothing points at one
    reason: str


@lru_cache(maxsize=1)
def _compiled() -> list[tuple[Engine, list[tuple[str, re.Pattern]]]]:
    return [(e, [(s, re.compile(s)) for s in e.signals]) for e in engines()]


def detect(text: str, override: str | None = None) -> EngineGuess:
    if override:
        e = engine_by_alias(override)
        if e is None:
            raise UsageError(f"unknown engine {override!r}: use one of {', '.join(x.id for x in engines())}")
        return EngineGuess(e.id, "--engine given")
    return best_guess(text, _compiled())


def best_guess(text: str, compiled) -> EngineGuess:
    """The engine whose signals (compiled as `_compiled()` gives them) appear on the most lines of `text`.

    Worker prefixes ("(Worker_TP0 pid=1)", "(RayWorkerWrapper pid=1, ip=..)", "[2025-01-01 10:00:00 TP0]") are
    signals too, but triage/logtext.py strips them from LogText.lines: give the log as pasted (LogText.raw) for
    them to count."""
    # Score = how many lines carry the engine's signals (then how many distinct signals). Counting distinct
    # signals alone misread SGLang tracebacks that pass through vLLM layers (SGLang imports them) as vLLM:
    # two vLLM signals in a few frames outnumbered the one SGLang signal found in dozens of frames.
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    best: tuple[tuple[int, int], Engine | None, list[str]] = ((0, 0), None, [])
    for e, sigs in compiled:
        found, lines = [], set()
        for _, rx in sigs:
            first = None
            for m in rx.finditer(text):
                first = first or m.group(0).strip()[:40]
                lines.add(bisect.bisect_right(starts, m.start()))
            if first is not None:
                found.append(first)
        score = (len(lines), len(found))
        if score > best[0]:
            best = (score, e, found)
    if best[1] is None:
        return EngineGuess(None, "no engine-specific paths, modules or log prefixes found")
    shown = ", ".join(f"'{s}'" for s in best[2][:4])
    return EngineGuess(best[1].id, f"{best[0][0]} line(s) with {len(best[2])} of its signals: {shown}")
