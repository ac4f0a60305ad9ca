"""The taxonomy as data: RE classes, components, known-fix tags and engines, loaded from the TOML files here.

Every other module asks this one; no other module spells out the classes, components, tags or engine names.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
LABELS_DIR = HERE / "labels"
HOLDOUT_DIR = HERE / "holdout"  # labeled like labels/, kept out of every fit: issues no model has read


@dataclass(frozen=True)
class Term:
    id: str
    definition: str
    name: str = ""


@dataclass(frozen=True)
class Engine:
    id: str
    name: str
    repo: str
    aliases: tuple[str, ...]
    former_repos: tuple[str, ...]
    signals: tuple[str, ...] = ()


@lru_cache(maxsize=None)
def _load(name: str) -> dict:
    with open(HERE / name, "rb") as f:
        return tomllib.load(f)


def re_classes() -> list[Term]:
    return [Term(d["id"], d["definition"], d.get("name", "")) for d in _load("taxonomy.toml")["re_class"]]


def components() -> list[Term]:
    return [Term(d["id"], d["definition"]) for d in _load("taxonomy.toml")["component"]]


def fix_tags() -> list[Term]:
    return [Term(d["id"], d["definition"]) for d in _load("taxonomy.toml")["fix_tag"]]


def fix_tag_for_engine(tag: str, engine: str | None) -> str:
    """The fix tag as it applies to an issue of `engine`: a tag meant for other engines (its `engines` in
    taxonomy.toml) becomes its `otherwise` (device memory exhausted is `llamacpp_offload` on llama.cpp and
    `oom_four_step` elsewhere); unchanged when the engine is unknown or the tag names no engines."""
    bound = engine_bound_fix_tags().get(tag)
    if bound is None or engine is None or engine in bound[0]:
        return tag
    return bound[1]


@lru_cache(maxsize=1)
def engine_bound_fix_tags() -> dict[str, tuple[tuple[str, ...], str]]:
    """tag -> (the engines it is for, what it becomes elsewhere), for the tags taxonomy.toml binds to engines."""
    return {d["id"]: (tuple(d["engines"]), d["otherwise"]) for d in _load("taxonomy.toml")["fix_tag"]
            if d.get("engines") and d.get("otherwise")}


@lru_cache(maxsize=1)
def fix_tag_classes() -> dict[str, tuple[str, ...]]:
    """tag -> the resource classes it implies (taxonomy.toml `implies`), for the tags that imply one: out-of-memory
    steps, the KV budget, offloading, NCCL, shared memory. Such a fix beside the class `none` is a disagreement
    (classifier/decision.py)."""
    return {d["id"]: tuple(d["implies"]) for d in _load("taxonomy.toml")["fix_tag"] if d.get("implies")}


def re_class_ids() -> list[str]:
    return [t.id for t in re_classes()]


def resource_class_ids() -> list[str]:
    """The four resource classes, without `none`."""
    return [c for c in re_class_ids() if c != "none"]


def component_ids() -> list[str]:
    return [t.id for t in components()]


def fix_tag_ids() -> list[str]:
    return [t.id for t in fix_tags()]


def engines() -> list[Engine]:
    return list(_engines())


@lru_cache(maxsize=1)
def _engines() -> tuple[Engine, ...]:
    return tuple(
        Engine(d["id"], d["name"], d["repo"], tuple(d["aliases"]), tuple(d.get("former_repos", [])),
               tuple(d.get("signals", [])))
        for d in _load("engines.toml")["engine"]
    )


def engine_by_alias(alias: str) -> Engine | None:
    a = alias.strip().lower()
    for e in engines():
        if a == e.id.lower() or a in (x.lower() for x in e.aliases) or a == e.repo.lower():
            return e
        if a in (x.lower() for x in e.former_repos):
            return e
    return None


def engine_for_repo(repo: str) -> Engine | None:
    r = repo.lower()
    for e in engines():
        if r == e.repo.lower() or r in (x.lower() for x in e.former_repos):
            return e
    return None


def canonical_repo(repo: str) -> str:
    """`ggerganov/llama.cpp` -> `ggml-org/llama.cpp`; unknown repos keep their spelling."""
    e = engine_for_repo(repo)
    return e.repo if e else repo
