"""Fix text for the detected engine only (triage/fixtext.py) and the panel at 80 columns (triage/render.py).

Answers are built from the real rules matched on real traces (no model needed): TriageResult is plain data."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from retriage.core.rules import load_rules, match_rules
from retriage.triage import logtext
from retriage.triage.classify import TriageResult
from retriage.triage.fixtext import ENGINE_NAMES, fix, for_engine, source_engine
from retriage.triage.render import print_result

TRACES = Path(__file__).resolve().parent / "data" / "traces"
RULES = load_rules()[0]
OTHER_FLAGS = {  # flags only one engine has
    "vllm": ("--gpu-memory-utilization", "--enforce-eager", "--max-model-len"),
    "sglang": ("--mem-fraction-static", "--disable-cuda-graph", "--chunked-prefill-size"),
    "trtllm": ("kv_cache_free_gpu_memory_fraction", "--max_batch_size"),
    "llama.cpp": ("-ngl", "--ctx-size"),
}


def answer(name: str, engine: str, similar=()) -> TriageResult:
    log = logtext.parse((TRACES / name).read_bytes())
    matches = match_rules(log.lines, engine)
    return TriageResult(engine=engine, engine_reason="--engine given", re_class=matches[0].rule.re_class,
                        re_confidence=0.9, component=matches[0].rule.component, component_confidence=0.8,
                        abstained=False, fixes=[fix(m, engine) for m in matches[:3]],
                        evidence=[m.line for m in matches[:3]], similar=list(similar), model_version="m-test",
                        model_class={"re_class": matches[0].rule.re_class, "re_confidence": 0.9})


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm", "llama.cpp"])
def test_no_other_engine_in_caveats_sources_or_steps(engine):
    others = [e for e in ENGINE_NAMES if e != engine]
    for r in RULES:
        if engine not in r.engines:
            continue
        caveats, sources = for_engine(r, engine)
        for c in caveats:
            assert not any(ENGINE_NAMES[o].search(c) for o in others), (r.id, c)
            assert not any(f"`{flag}" in c for o in others for flag in OTHER_FLAGS[o]
                           if not any(flag in s for s in r.steps_for(engine))), (r.id, c)
        assert all(source_engine(s) in (None, engine) for s in sources), r.id
        for s in r.steps.get(engine, []):
            assert not any(ENGINE_NAMES[o].search(s) for o in others if o != "trtllm" or engine != "trtllm"), (r.id, s)


def test_trtllm_log_gets_only_trtllm_advice():
    """The runtime-OOM rule has steps, caveats and sources for three engines; a TensorRT-LLM log sees its own."""
    r = next(x for x in RULES if x.id == "cuda-oom-runtime")
    caveats, sources = for_engine(r, "trtllm")
    text = " ".join(caveats + sources + r.steps_for("trtllm"))
    assert "vLLM" not in text and "SGLang" not in text and "--gpu-memory-utilization" not in text
    assert "vllm-project" not in text and "sgl-project" not in text
    assert any("TensorRT-LLM" in s for s in sources)
    all_caveats, all_sources = for_engine(r, None)  # unknown engine: everything
    assert set(caveats) < set(all_caveats) and set(sources) < set(all_sources)


def test_steps_are_numbered_once():
    for r in RULES:
        for steps in r.steps.values():
            assert not any(re.match(r"\s*\(\d\)", s) for s in steps), r.id
    out = render(answer("vllm_cuda_oom_1.txt", "vllm"), 80)
    assert re.search(r"^\W*1\. \S", out, re.M) and not re.search(r"\d\. \(\d\)", out)


def render(result: TriageResult, width: int) -> str:
    buf = io.StringIO()
    print_result(Console(file=buf, width=width, force_terminal=False, color_system=None), result)
    return buf.getvalue()


@pytest.mark.parametrize("name, engine", [("vllm_v1_kv_budget_models_1.txt", "vllm"),
                                          ("trtllm_kv_no_free_blocks.txt", "trtllm"),
                                          ("vllm_container_shm_1.txt", "vllm"),
                                          ("sglang_nccl_shm_2.txt", "sglang")])
def test_every_url_appears_whole_on_one_line_at_80_columns(name, engine):
    similar = [{"repo": "sgl-project/sglang", "number": 5096, "title": "[Bug] shared memory (/dev/shm) error when "
                "using FA3 with meta-llama/Llama-3.1-70B-Instruct on a multi-GPU host", "state": "closed",
                "score": 0.71, "html_url": "https://github.com/sgl-project/sglang/issues/5096", "known_fix": "ipc_host"}]
    r = answer(name, engine, similar)
    out = render(r, 80)
    lines = out.splitlines()
    urls = r.fixes[0]["sources"] + [s["html_url"] for s in similar]
    assert urls
    for url in urls:
        assert any(url in ln for ln in lines), url
    panel = [ln for ln in lines if ln.startswith(("╭", "│", "╰"))]
    assert panel and all(len(ln) <= 80 for ln in panel)
    assert not any("https://" in ln for ln in panel)  # URLs only below the panel, never wrapped inside it
