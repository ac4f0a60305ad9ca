"""A regression named in a log or a report: "worked on 0.6.3, fails on 0.7.0", "after upgrading from 0.5.4 to
0.6.0", "bisected to #12345", "introduced by commit abc1234" (patterns: taxonomy/evidence.toml [regression]).

`regression_advice(text)` is the one call for classify and the bot: None when no regression is named, else a
dict with the versions (`good`, `bad`) and/or the named change (`change`), the line it was read from (`line`), and
the step to take first (`step`): the previous release or the named change, before generic memory steps.
`lead_with(fixes, advice)` puts that step first in the first fix's steps.
"""

from __future__ import annotations

import re
from functools import lru_cache

from retriage.triage.evidence import _data


@lru_cache(maxsize=1)
def _patterns() -> tuple[list[re.Pattern], list[re.Pattern], str, str]:
    d = _data()["regression"]
    return ([re.compile(p) for p in d["versions"]], [re.compile(p) for p in d["changes"]], d["advice_versions"],
            d["advice_change"])


def _line(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[start:end if end >= 0 else len(text)].strip()[:400]


def regression_advice(text: str) -> dict | None:
    """The regression the text names, with the step to take first (module docstring); None when none is named."""
    versions, changes, say_versions, say_change = _patterns()
    out: dict = {}
    for rx in versions:
        m = rx.search(text or "")
        if m and m.group("good") != m.group("bad"):
            out.update(good=m.group("good"), bad=m.group("bad"), line=_line(text, m.start()))
            break
    for rx in changes:
        m = rx.search(text or "")
        if m:
            out.setdefault("line", _line(text, m.start()))
            out["change"] = m.group("change")
            break
    if not out:
        return None
    steps = []
    if "change" in out:
        steps.append(say_change.format(**out))
    if "good" in out:
        steps.append(say_versions.format(**out))
    out["step"] = " ".join(steps)
    return out


def lead_with(fixes: list[dict], advice: dict | None) -> list[dict]:
    """The fixes with the regression step first in the first fix's steps (unchanged without a regression)."""
    if not advice or not fixes:
        return fixes
    first = dict(fixes[0], steps=[advice["step"]] + list(fixes[0]["steps"]))
    return [first] + fixes[1:]
