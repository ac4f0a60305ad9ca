"""Known-fix rules (taxonomy/rules.toml) against the real traces in tests/data/traces/.

The manifests say, for each real log excerpt, which rule must be the primary match, which rules must not match
at all (near misses) and which fix tag the team gives the trace. Nothing here restates a rule's patterns.
"""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from retriage.taxonomy import component_ids, engines, fix_tag_ids, re_class_ids
from retriage.triage import logtext
from retriage.core.folded import fold
from retriage.core.rules import RulesError, load_rules, match_rules

TRACES = Path(__file__).resolve().parent / "data" / "traces"
MANIFESTS = ("manifest.toml", "manifest_added.toml")
HOLDOUT = TRACES / "holdout"  # traces kept out of writing the rules and of calibrating the verdict
RULES, WRAPPERS = load_rules()
RULES_BY_ID = {r.id: r for r in RULES}


def manifest(folder: Path = TRACES, names=MANIFESTS) -> list[dict]:
    out = []
    for name in names:
        with open(folder / name, "rb") as f:
            out += [{**e, "folder": folder} for e in tomllib.load(f)["trace"]]
    return out


ENTRIES = manifest()
HELD_OUT = manifest(HOLDOUT, ("manifest.toml",))


def matches(entry: dict) -> list:
    log = logtext.parse((entry["folder"] / entry["file"]).read_bytes())
    return match_rules(log.lines, entry["engine"] or None)


def test_manifest_names_existing_files_rules_and_tags():
    names = [e["file"] for e in ENTRIES]
    assert len(names) == len(set(names)), "a trace is listed twice"
    engine_ids = {e.id for e in engines()}
    for e in ENTRIES + HELD_OUT:
        assert (e["folder"] / e["file"]).is_file(), e["file"]
        assert e["expect_class"] in re_class_ids(), e["file"]
        assert e["engine"] in engine_ids | {""}, e["file"]  # "": the excerpt names no engine
        assert e["expect_rule"] == "" or e["expect_rule"] in RULES_BY_ID, e["file"]
        assert set(e["forbid_rules"]) <= set(RULES_BY_ID), e["file"]
        assert e["expect_tag"] in fix_tag_ids(), e["file"]
    on_disk = {p.name for p in TRACES.glob("*.txt")}
    assert on_disk == set(names), f"traces without a manifest entry: {sorted(on_disk - set(names))}"
    assert {p.name for p in HOLDOUT.glob("*.txt")} == {e["file"] for e in HELD_OUT}


@pytest.mark.parametrize("entry", ENTRIES + HELD_OUT, ids=[e["file"] for e in ENTRIES + HELD_OUT])
def test_primary_rule_and_near_misses(entry):
    found = [m.rule.id for m in matches(entry)]
    primary = found[0] if found else ""
    assert primary == entry["expect_rule"], f"all matches: {found}"
    assert not set(found) & set(entry["forbid_rules"]), f"near-miss rules matched: {found}"


def test_every_rule_has_a_positive_and_a_near_miss_trace():
    positives = Counter(e["expect_rule"] for e in ENTRIES if e["expect_rule"])
    near_misses = Counter(r for e in ENTRIES for r in e["forbid_rules"])
    few = {r.id: positives[r.id] for r in RULES if positives[r.id] < 2}
    print(f"\nrules with fewer than 2 positive traces ({len(few)} of {len(RULES)}): "
          + ", ".join(f"{k}={v}" for k, v in sorted(few.items())))
    assert [r.id for r in RULES if positives[r.id] < 1] == []
    assert [r.id for r in RULES if near_misses[r.id] < 1] == []
    # two real positives each (held-out traces not counted)
    assert few == {}, few
    for e in ENTRIES:
        if e["expect_rule"]:
            assert (e["folder"] / e["file"]).read_text().startswith("# source: https://"), e["file"]


def test_fix_tag_accuracy_over_the_traces():
    hits = 0
    wrong = []
    for e in ENTRIES:
        found = matches(e)
        tag = found[0].rule.tag if found else "none"
        hits += tag == e["expect_tag"]
        if tag != e["expect_tag"]:
            wrong.append(f"{e['file']}: {tag} (team: {e['expect_tag']})")
    accuracy = hits / len(ENTRIES)
    print(f"\nfix-tag accuracy over {len(ENTRIES)} labeled traces: {accuracy:.3f}; misses: {wrong}")
    assert accuracy >= 0.9


# ---- the rule file -----------------------------------------------------------------------------------------
def test_rule_file_validates_against_the_taxonomy():
    engine_ids = {e.id for e in engines()}
    assert len(RULES) == len(RULES_BY_ID)
    for r in RULES:
        assert r.tag in fix_tag_ids() and r.re_class in re_class_ids() and r.component in component_ids(), r.id
        assert r.engines and set(r.engines) <= engine_ids, r.id
        assert set(r.steps) <= engine_ids | {"default"}, r.id
        assert r.steps.get("default"), f"{r.id}: no default steps"
        for engine in r.engines:
            assert r.steps_for(engine), f"{r.id}: no steps for {engine}"
        assert r.title.strip(), r.id
        assert r.sources and all(s.startswith("https://") for s in r.sources), r.id
    assert WRAPPERS.search(fold("RuntimeError: Engine core initialization failed. See root cause above."))


def test_guide_fix_tags_are_covered():
    guide_tags = {"ipc_host", "enforce_eager", "oom_four_step", "raise_kv_budget", "nccl_debug",
                  "spawn_start_method", "cuda_arch_mismatch", "llamacpp_offload"}
    assert guide_tags <= set(fix_tag_ids())
    assert guide_tags <= {r.tag for r in RULES}


@pytest.mark.parametrize("change, message", [
    (('tag = "oom_four_step"', 'tag = "no_such_tag"'), "unknown tag"),
    (('re_class = "RE.1"', 're_class = "RE.9"'), "unknown tag, class or component"),
    (('id = "vllm-no-kv-cache-blocks"', 'id = "vllm-maxlen-gt-kv-capacity"'), "repeated"),
    (("'No available memory for the cache blocks'", "'No available (memory'"), "bad regex"),
])
def test_invalid_rule_file_is_refused(tmp_path, change, message):
    text = (Path(__file__).resolve().parents[1] / "taxonomy" / "rules.toml").read_text()
    old, new = change
    assert old in text
    bad = tmp_path / "rules.toml"
    bad.write_text(text.replace(old, new, 1))
    with pytest.raises(RulesError, match=message.split(",")[0]):
        load_rules(bad)


# ---- direction and the per-engine flags ---------------------------------------------------------------------
LOWER = re.compile(r"(?i)\b(lower|decrease|reduce|smaller|shrink)\b")
RAISE = re.compile(r"(?i)\b(raise|increase|larger|higher|grow|enlarge)\b")
ARROW = re.compile(r"(\d+(?:\.\d+)?)\s*->\s*(\d+(?:\.\d+)?)")


def flags(steps: list[str]) -> set[str]:
    """Every option-like token written in backticks in the steps: `--tp N` -> --tp, `-ctk q8_0 -ctv q8_0` -> -ctk, -ctv."""
    out = set()
    for span in re.findall(r"`([^`]+)`", "\n".join(steps)):
        for token in span.split():
            out.add(token.split("=")[0])
    return out


def direction(step: str, flag: str) -> str:
    """'lower' or 'raise': the last direction word before the flag in the step (and any 'a -> b' after it)."""
    before = step[:step.index(f"`{flag}")]
    words = [(m.start(), "lower") for m in LOWER.finditer(before)] + [(m.start(), "raise") for m in RAISE.finditer(before)]
    assert words, f"no direction word before {flag}: {step!r}"
    verdict = max(words)[1]
    arrow = ARROW.search(step[step.index(f"`{flag}"):])
    if arrow:
        a, b = float(arrow.group(1)), float(arrow.group(2))
        assert (b < a) == (verdict == "lower"), f"example values contradict '{verdict}': {step!r}"
    return verdict


def steps_with(rule_id: str, engine: str, flag: str) -> list[str]:
    found = [s for s in RULES_BY_ID[rule_id].steps_for(engine) if f"`{flag}" in s]
    assert found, f"{rule_id} ({engine}) never mentions {flag}"
    return found


@pytest.mark.parametrize("engine, flag", [("vllm", "--gpu-memory-utilization"), ("sglang", "--mem-fraction-static"),
                                          ("trtllm", "kv_cache_free_gpu_memory_fraction")])
def test_runtime_oom_lowers_the_memory_fraction(engine, flag):
    for step in steps_with("cuda-oom-runtime", engine, flag):
        assert direction(step, flag) == "lower", step


def kv_budget_rules(engine: str) -> list[str]:
    return [r.id for r in RULES if r.tag == "raise_kv_budget" and engine in r.engines]


@pytest.mark.parametrize("engine, flag", [("vllm", "--gpu-memory-utilization"), ("sglang", "--mem-fraction-static"),
                                          ("trtllm", "kv_cache_free_gpu_memory_fraction")])
def test_kv_budget_rules_raise_the_memory_fraction(engine, flag):
    ids = kv_budget_rules(engine)
    assert ids, f"no raise_kv_budget rule for {engine}"
    for rid in ids:
        for step in steps_with(rid, engine, flag):
            assert direction(step, flag) == "raise", f"{rid}: {step}"


FOUR_STEP = {
    "vllm": ("--gpu-memory-utilization", "--max-model-len", "--kv-cache-dtype", "--tensor-parallel-size"),
    "sglang": ("--mem-fraction-static", "--context-length", "--kv-cache-dtype", "--tp"),
    "trtllm": ("kv_cache_free_gpu_memory_fraction", "max_num_tokens", "max_batch_size", "tp_size"),
    "llama.cpp": ("-ngl", "-c", "-ctk"),
}


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_runtime_oom_rule_spells_the_four_steps_per_engine(engine):
    missing = set(FOUR_STEP[engine]) - flags(RULES_BY_ID["cuda-oom-runtime"].steps_for(engine))
    assert not missing


def test_trtllm_memory_rule_spells_the_four_steps():
    rules = [r for r in RULES if r.engines == ("trtllm",) and r.tag == "oom_four_step"]
    assert rules
    for r in rules:
        assert not set(FOUR_STEP["trtllm"]) - flags(r.steps_for("trtllm")), r.id


def test_llamacpp_memory_rules_spell_offload_context_and_kv_quantization():
    rules = [r for r in RULES if r.tag == "llamacpp_offload"]
    assert rules and all(r.engines == ("llama.cpp",) for r in rules)
    for r in rules:
        assert not set(FOUR_STEP["llama.cpp"]) - flags(r.steps_for("llama.cpp")), r.id
        assert direction(next(s for s in r.steps_for("llama.cpp") if "`-ngl`" in s), "-ngl") == "lower", r.id


def test_engine_filter_skips_rules_of_other_engines():
    """A rule restricted to llama.cpp answers a llama.cpp trace only when the engine is llama.cpp (or unknown)."""
    entry = next(e for e in ENTRIES if e["engine"] == "llama.cpp" and e["expect_rule"]
                 and RULES_BY_ID[e["expect_rule"]].engines == ("llama.cpp",))
    lines = logtext.parse((TRACES / entry["file"]).read_bytes()).lines
    assert entry["expect_rule"] in [m.rule.id for m in match_rules(lines, None)]
    assert entry["expect_rule"] not in [m.rule.id for m in match_rules(lines, "vllm")]


# ---- values quoted from the log ------------------------------------------------------------------------------
def entry(name: str) -> dict:
    return next(e for e in ENTRIES + HELD_OUT if e["file"] == name)


@pytest.mark.parametrize("name, quoted", [
    ("vllm_v1_kv_budget_models_1.txt", "`--max-model-len 5632`"),   # "models's" spelling
    ("vllm_v1_kv_budget_model_1.txt", "`--max-model-len 199552`"),  # "model's" spelling
    ("vllm_maxlen_kv_1.txt", "`--max-model-len 23968`"),            # older message: the KV capacity
])
def test_kv_budget_step_quotes_the_length_the_log_printed(name, quoted):
    m = matches(entry(name))[0]
    steps = m.rule.steps_for("vllm", m.values)
    assert any(quoted in s for s in steps), steps
    assert not any("{" in s for s in steps), steps


def test_kv_budget_step_without_an_estimate_falls_back_to_words():
    m = matches(entry("vllm_v1_kv_budget_models_noest_1.txt"))[0]
    first = m.rule.steps_for("vllm", m.values)[0]
    assert "`--max-model-len N`" in first and "1048576" in first and "{" not in first


def test_llamacpp_context_step_quotes_prompt_and_slot_sizes():
    m = matches(entry("llamacpp_request_exceeds_context_3.txt"))[0]
    first = m.rule.steps_for("llama.cpp", m.values)[0]
    assert "2059" in first and "2048" in first and direction(first, "-c") == "raise"


def test_startup_free_memory_step_lowers_the_quoted_fraction():
    m = matches(entry("vllm_startup_free_mem_2.txt"))[0]
    step = m.rule.steps_for("vllm", m.values)[0]
    assert "0.95" in step and "31.44/47.38 GiB" in step
    assert direction(step, "--gpu-memory-utilization") == "lower"


def test_placeholder_without_a_capture_is_refused(tmp_path):
    text = (Path(__file__).resolve().parents[1] / "taxonomy" / "rules.toml").read_text()
    old = "Re-run with `NCCL_DEBUG=INFO` (or `TRACE`) and read the first WARN line."
    assert old in text
    bad = tmp_path / "rules.toml"
    bad.write_text(text.replace(old, "Re-run with {nothing_captured}.", 1))
    with pytest.raises(RulesError, match="names no capture"):
        load_rules(bad)
