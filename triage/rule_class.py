"""The class a matched known-fix rule gives a text: the rule's own, or the class it names for two situations the
guide counts as multi-device (RE.3) when the text shows them:

- `multi_device_class`: several devices or worker processes at work (tensor parallel > 1, `world_size`, Ray
  workers), e.g. a /dev/shm shortage that arises only because GPUs exchange data;
- `mixed_gpu_class`: the environment lists GPUs of different compute capabilities, e.g. a bf16 check that read
  the older card on a machine whose newer card would run the model (vllm#7472).

Used by `classify`'s verdict (triage/verdict.py); the labeling of stored issues (classifier/device_class.py) reads
the mixed-GPU case from the same test (taxonomy/environment.mixed_capabilities).
"""

from __future__ import annotations

import re

from retriage.core.rules import Match
from retriage.taxonomy.environment import mixed_capabilities

_SEVERAL_DEVICES = [
    re.compile(r"tensor[-_]parallel[-_]size['\"]?\s*[=:]?\s*['\"]?([2-9]|\d{2,})\b", re.I),
    re.compile(r"(?:--tp|--tp-size|--tp_size)[= ]([2-9]|\d{2,})\b"),
    re.compile(r"\bworld_size=([2-9]|\d{2,})\b"),
    re.compile(r"\bRayWorker\w*\b"),
    re.compile(r"\bTP[1-9]\d*\]"),
]


def several_devices(text: str) -> str | None:
    """The evidence that several devices or worker processes are at work, or None."""
    for rx in _SEVERAL_DEVICES:
        m = rx.search(text)
        if m:
            return m.group(0).strip()
    return None


def rule_class(match: Match, text: str) -> tuple[str, str | None]:
    """(the class the matched rule gives this text, a phrase naming the evidence when a multi-device situation
    changed it: "several devices in the log ('--tp 2')", "GPUs of compute capability 7.5 / 8.9")."""
    r = match.rule
    if r.multi_device_class and (why := several_devices(text)):
        return r.multi_device_class, f"several devices in the log ('{why}')"
    if r.mixed_gpu_class and (why := mixed_capabilities(text)):
        return r.mixed_gpu_class, f"GPUs of {why}"
    return r.re_class, None
