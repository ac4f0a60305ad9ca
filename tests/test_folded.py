"""Case-folded regex search (classifier/folded.py) finds exactly what IGNORECASE search finds."""

from __future__ import annotations

import gzip
import json
import re
import tomllib
from pathlib import Path

import pytest

from conftest import corpus_file
from retriage.core.folded import compile_folded, fold, fold_pattern
from retriage.taxonomy import HERE as TAXONOMY_DIR
from retriage.core.rules import RULES_FILE

TRACES = Path(__file__).resolve().parent / "data" / "traces"


def all_patterns() -> list[str]:
    rules = tomllib.loads(RULES_FILE.read_text())
    pats = [p for r in rules["rule"] for p in r["patterns"] + r.get("not_patterns", [])] + rules.get("wrappers", [])
    kw = tomllib.loads((TAXONOMY_DIR / "keywords.toml").read_text())
    pats += [p for section in ("re_class", "component") for ps in kw[section].values() for p in ps]
    return pats


def real_texts() -> list[str]:
    texts = [f.read_text(errors="replace") for f in sorted(TRACES.glob("*.txt"))]
    with gzip.open(corpus_file("vllm.jsonl.gz"), "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i % 5 == 0:
                r = json.loads(line)
                texts.append((r["title"] or "") + "\n" + (r["body"] or ""))
    return texts


@pytest.mark.slow  # seconds of work: the full tier
def test_every_rule_and_keyword_pattern_matches_where_ignorecase_matches():
    texts = real_texts()
    folded = [fold(t) for t in texts]
    pats = all_patterns()
    assert len(pats) > 150
    hits = 0
    for p in pats:
        ref, fast = re.compile(p, re.I | re.M), compile_folded(p, re.M)
        for t, ft in zip(texts, folded):
            a, b = ref.search(t), fast.search(ft)
            assert (a and a.span()) == (b and b.span()), (p, t[:80])
            hits += a is not None
    assert hits > 500  # the comparison saw many real matches, not only misses
    # nearly all of them take the fast route
    assert sum(fold_pattern(p) is not None for p in pats) >= 0.95 * len(pats)


@pytest.mark.parametrize("pattern, text", [
    (r"\S+Error", "ValueError"),            # an escape keeps its case: \S is not \s
    (r"[A-Z]{3}", "abc"),
    (r"[^A-Z]x", "AX"),                     # negated class: no match either way
    (r"[A-z]", "_"),                        # a range across cases: compiled with IGNORECASE
    (r"\x41BC", "abc"),                     # hex escape of an upper-case letter
    (r"(?P<Kind>oom)|(?P=Kind)", "OOM"),
])
def test_edge_cases_agree_with_ignorecase(pattern, text):
    ref = re.compile(pattern, re.I).search(text)
    got = compile_folded(pattern).search(fold(text))
    assert (ref and ref.span()) == (got and got.span())


def test_unsafe_patterns_are_not_rewritten():
    assert fold_pattern(r"[A-z]") is None
    assert fold_pattern(r"\x41") is None
    assert fold_pattern(r"CUDA\S") == r"cuda\S"


def test_fold_keeps_length_and_positions():
    text = "İstanbul CUDA error"  # 'İ'.lower() is two characters
    f = fold(text)
    assert len(f) == len(text) and f.endswith("cuda error")
    m = compile_folded("CUDA").search(f)
    assert text[m.start():m.end()] == "CUDA"


def test_a_case_sensitive_part_is_refused():
    with pytest.raises(ValueError):
        compile_folded(r"(?-i:CUDA) error")
