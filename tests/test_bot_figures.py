"""The README's "Bot" threshold table is what retriage/bot/figures.py measures on the dev split with the shipped
model's held-out fit, and its "(default)" rows are the thresholds taxonomy/bot.toml ships."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from retriage.bot.config import load_config

pytestmark = pytest.mark.slow  # the shipped model predicts the whole dev split

README = Path(__file__).resolve().parents[1] / "README.md"
# README rows, in order: (figure, threshold)
ROWS = [("class", 0.70), ("class", 0.48), ("class", 0.85), ("component", 0.70), ("component", 0.50),
        ("rules", None), ("fix_head", 0.70), ("fix_head", 0.15), ("similar", 0.75), ("similar", 0.60),
        ("class", 0.85)]


def bot_table() -> list[tuple[str, float, int]]:
    section = README.read_text().split("## Bot\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\|[^|]*\| ([^|]*) \| ([\d.]+) \| (\d+)", section, re.M)
    return [(cell, float(p), int(n)) for cell, p, n in rows]


def test_readme_bot_figures_are_measured():
    from retriage.bot.figures import dev_figures

    cfg = load_config()
    f = dev_figures({t for k, t in ROWS if k == "class"}, {t for k, t in ROWS if k == "component"},
                    {t for k, t in ROWS if k == "fix_head"}, {t for k, t in ROWS if k == "similar"}, cfg)
    table = bot_table()
    assert len(table) == len(ROWS)
    tables = {"class": f.class_right, "component": f.component_right, "fix_head": f.fix_head_right,
              "similar": f.similar_right}
    for (kind, t), (cell, precision, said) in zip(ROWS, table):
        right, n = f.rules if kind == "rules" else tables[kind][t]
        assert (round(right / n, 3), n) == (precision, said), (kind, t, cell)
    shipped = {"class": cfg.class_confidence, "component": cfg.component_confidence,
               "fix_head": cfg.fix_head_confidence, "similar": cfg.similar_score}
    defaults = [(kind, t) for (kind, t), (cell, _, _) in zip(ROWS, table) if "(default)" in cell]
    assert defaults[:-1] == [(k, shipped[k]) for k in ("class", "component", "fix_head", "similar")]
    assert defaults[-1] == ("class", cfg.label_confidence)  # the labels row
    assert all(f"{t:.2f}" in cell for (_, t), (cell, _, _) in zip(ROWS, table) if t is not None)
