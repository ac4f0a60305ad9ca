"""The bot's settings: thresholds, comment limits and the class -> label mapping (taxonomy/bot.toml)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from retriage.core.errors import UserError
from retriage.taxonomy import HERE as TAXONOMY_DIR
from retriage.taxonomy import resource_class_ids

BOT_FILE = TAXONOMY_DIR / "bot.toml"


@dataclass(frozen=True)
class BotConfig:
    class_confidence: float
    component_confidence: float
    fix_head_confidence: float
    similar_score: float
    label_confidence: float
    marker: str
    max_chars: int
    max_similar: int
    max_evidence_lines: int
    max_line_chars: int
    max_steps: int
    labels: dict = field(default_factory=dict)  # engine id or "default" -> class -> [label names]
    corrections: dict = field(default_factory=dict)  # engine id or "default" -> label name -> {class, component, fix}

    def label_meaning(self, engine: str | None, label: str) -> dict:
        """What a maintainer's label says about an issue ({"class": ..., "component": ..., "fix": ...}, any
        subset; {} for a label that says nothing)."""
        name = label.strip().lower()
        for table in (self.corrections.get(engine or "", {}), self.corrections.get("default", {})):
            for key, meaning in table.items():
                if key.lower() == name:
                    return dict(meaning)
        return {}

    def labels_for(self, engine: str | None, re_class: str) -> list[str]:
        table = self.labels.get(engine or "", {})
        return list(table.get(re_class, self.labels.get("default", {}).get(re_class, [])))


def _number(d: dict, key: str, where: str, kind=float, low=0.0, high=1.0):
    value = d.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise UserError(f"{where}: {key} must be a number from {low} to {high}, got {value!r}")
    return kind(value)


def load_config(path: Path | str | None = None) -> BotConfig:
    """taxonomy/bot.toml, or `path` over it (keys a file leaves out keep the shipped values)."""
    with open(BOT_FILE, "rb") as f:
        data = tomllib.load(f)
    where = str(BOT_FILE)
    if path is not None:
        where = str(path)
        try:
            with open(path, "rb") as f:
                mine = tomllib.load(f)
        except OSError as e:
            raise UserError(f"{path}: cannot read: {e.strerror}") from None
        except tomllib.TOMLDecodeError as e:
            raise UserError(f"{path}: not TOML: {e}") from None
        for section in ("thresholds", "comment"):
            data[section] = {**data.get(section, {}), **mine.get(section, {})}
        for section in ("labels", "corrections"):
            if section in mine:
                data[section] = mine[section]
    t, c = data.get("thresholds", {}), data.get("comment", {})
    labels = data.get("labels", {})
    classes = set(resource_class_ids())
    for engine, table in labels.items():
        if not isinstance(table, dict) or not set(table) <= classes or not all(
                isinstance(v, list) and all(isinstance(x, str) for x in v) for v in table.values()):
            raise UserError(f"{where}: [labels.{engine}] must map {', '.join(sorted(classes))} to lists of names")
    corrections = data.get("corrections", {})
    _check_corrections(corrections, where)
    marker = c.get("marker")
    if not isinstance(marker, str) or not (marker.startswith("<!--") and marker.endswith("-->")):
        raise UserError(f"{where}: marker must be an HTML comment such as '<!-- retriage -->'")
    return BotConfig(
        class_confidence=_number(t, "class", where), component_confidence=_number(t, "component", where),
        fix_head_confidence=_number(t, "fix_head", where), similar_score=_number(t, "similar", where),
        label_confidence=_number(t, "label", where), marker=marker,
        max_chars=_number(c, "max_chars", where, int, 1000, 65000),
        max_similar=_number(c, "max_similar", where, int, 0, 20),
        max_evidence_lines=_number(c, "max_evidence_lines", where, int, 0, 50),
        max_line_chars=_number(c, "max_line_chars", where, int, 20, 2000),
        max_steps=_number(c, "max_steps", where, int, 1, 20), labels=labels, corrections=corrections,
    )


def _check_corrections(tables, where: str) -> None:
    from retriage.taxonomy import component_ids, fix_tag_ids, re_class_ids

    allowed = {"class": re_class_ids(), "component": component_ids(), "fix": fix_tag_ids()}
    if not isinstance(tables, dict):
        raise UserError(f"{where}: [corrections] must hold one table per engine (or default)")
    for engine, table in tables.items():
        if not isinstance(table, dict):
            raise UserError(f"{where}: [corrections.{engine}] must map label names to {{class, component, fix}}")
        for name, meaning in table.items():
            if not isinstance(meaning, dict) or not meaning or not all(
                    k in allowed and v in allowed[k] for k, v in meaning.items()):
                raise UserError(f"{where}: [corrections.{engine}] {name!r} must set class, component and/or fix to "
                                "ids of taxonomy/taxonomy.toml")
