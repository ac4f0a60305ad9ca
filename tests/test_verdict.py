"""One verdict (triage/verdict.py): a rule with a high measured precision decides the class, the model does
otherwise, and the answer says why when they differ. Real rules, real traces, the shipped precision file, whose
counts come from train-side traces only."""

from __future__ import annotations

import math
import sys
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retriage.core.rules import Match, load_rules, match_rules
from retriage.triage import logtext
from retriage.triage.rule_class import rule_class, several_devices
from retriage.triage.verdict import PRECISION_FILE, Precision, decide, load_precision, smoothed

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # bench/experiments is not part of the package: imported from the checkout

from bench.experiments import calibrate  # noqa: E402

TRACES = Path(__file__).resolve().parent / "data" / "traces"
RULES = {r.id: r for r in load_rules()[0]}


def first_match(name: str, folder: Path = TRACES, engine: str | None = None) -> tuple[Match, str]:
    log = logtext.parse((folder / name).read_bytes())
    return match_rules(log.lines, engine)[0], log.raw


def test_precision_file_matches_the_calibration_traces():
    """The counts in taxonomy/rule_precision.toml are those of the current rules over the calibration traces (the
    trace benchmark's train side and the hand-picked traces no test side holds): a rule, a label or a trace changed
    since calibration makes this fail (rerun `python -m bench.experiments.calibrate`)."""
    shipped = load_precision(PRECISION_FILE)
    ans = calibrate.answers(calibrate.inputs(), with_model=())  # the counts need no model
    assert calibrate.rule_counts(ans) == shipped.counts
    assert shipped.threshold in calibrate.THRESHOLDS and shipped.min_traces >= 2
    with open(PRECISION_FILE, "rb") as f:
        stored = tomllib.load(f)["rules"]
    for rid, (right, n) in shipped.counts.items():
        assert stored[rid]["precision"] == round(smoothed(right, n), 3) < 1


def test_calibration_inputs_hold_no_test_side_trace():
    """No trace of a test side (issues created on or after the cut-off, every TensorRT-LLM issue) is a calibration
    input: neither a benchmark trace nor a hand-picked trace cut from such an issue."""
    bench = calibrate.read_bench()
    test_side = calibrate.test_side_sources(bench)
    assert {r["html_url"] for r in bench if r["split"] in calibrate.TEST_SIDES} <= test_side
    items = calibrate.inputs()
    assert items and not {i.key for i in items} & test_side and not {i.source for i in items} & test_side
    assert {i.key for i in items if i.origin == "bench"} == {r["html_url"] for r in bench if r["split"] == "train"}
    assert not [i.key for i in items if i.origin == "fixture" and "TensorRT-LLM" in i.source]
    # and on made-up records: a test-side trace offered as input is refused
    fake = [{"html_url": "https://github.com/vllm-project/vllm/issues/1", "split": "train", "re_class": "none",
             "text": "ValueError: a"},
            {"html_url": "https://github.com/vllm-project/vllm/issues/2", "split": "test_time", "re_class": "RE.1",
             "text": "torch.OutOfMemoryError: CUDA out of memory."},
            {"html_url": "https://github.com/NVIDIA/TensorRT-LLM/issues/3", "split": "test_trtllm", "re_class": "RE.3",
             "text": "NCCL error"}]
    entries = [{"file": "vllm_container_shm_1.txt", "source": "https://github.com/vllm-project/vllm/issues/2",
                "engine": "vllm", "expect_class": "RE.3"},
               {"file": "trtllm_oom_engine_build.txt", "source": "https://github.com/NVIDIA/TensorRT-LLM/issues/346",
                "engine": "trtllm", "expect_class": "RE.1"},
               {"file": "vllm_maxlen_kv_1.txt", "source": "https://github.com/vllm-project/vllm/issues/10517",
                "engine": "vllm", "expect_class": "RE.1"}]
    keys = [i.key for i in calibrate.inputs(TRACES, fake, entries)]
    assert keys == ["https://github.com/vllm-project/vllm/issues/1", "vllm_maxlen_kv_1.txt"]


@given(st.integers(0, 10**6), st.integers(0, 10**6))
@settings(max_examples=200, deadline=None)
def test_verdict_confidence_is_never_one(right, wrong):
    """A rule right on every one of a million traces still decides with a confidence below 1."""
    m, raw = first_match("holdout/torch_container_shm_plain_h2.txt")
    v = decide([m], "RE.1", 0.5, False, raw, precision=Precision(0.5, 2, {m.rule.id: (right, right + wrong)}))
    assert 0 < v.confidence < 1
    if v.source == "rule":
        assert v.confidence == math.floor(smoothed(right, right + wrong) * 100 + 1e-9) / 100


def test_shipped_precisions_are_below_one():
    shipped = load_precision(PRECISION_FILE)
    assert shipped.counts and all(shipped.precision(rid) < 1 for rid in shipped.counts)


def test_a_trusted_rule_decides_and_says_why_in_one_line():
    m, raw = first_match("holdout/torch_container_shm_plain_h2.txt")
    precision = Precision(0.6, 2, {m.rule.id: (2, 2)})
    v = decide([m], "RE.3", 0.90, False, raw, precision=precision)  # the model said RE.3 for a plain /dev/shm error
    assert (v.re_class, v.source, v.abstained) == ("RE.1", "rule", False)
    assert v.reason and "\n" not in v.reason
    assert m.rule.id in v.reason and "2 of 2" in v.reason and "RE.3 (0.90)" in v.reason


def test_a_rule_below_the_threshold_leaves_the_model_class_and_says_so():
    m, raw = first_match("holdout/torch_container_shm_plain_h2.txt")
    v = decide([m], "RE.3", 0.90, False, raw, precision=Precision(0.6, 2, {m.rule.id: (1, 3)}))
    assert (v.re_class, v.source) == ("RE.3", "model")
    assert "1 of 3" in v.reason and "RE.3 (0.90) stands" in v.reason
    v = decide([m], "RE.3", 0.90, False, raw, precision=Precision(0.6, 2, {m.rule.id: (1, 1)}))
    assert v.source == "model" and "1 labeled trace only" in v.reason


def test_agreeing_rule_and_model_need_no_explanation():
    m, raw = first_match("vllm_v1_kv_budget_models_1.txt", engine="vllm")
    v = decide([m], "RE.1", 0.99, False, raw, precision=Precision(0.6, 2, {m.rule.id: (6, 6)}))
    assert v.re_class == "RE.1" and v.reason is None


def test_shm_shortage_under_tensor_parallel_is_multi_device():
    """vllm_container_shm_1.txt: /dev/shm too small in a container running --tensor-parallel-size 2."""
    m, raw = first_match("vllm_container_shm_1.txt", engine="vllm")
    assert several_devices(raw)
    assert rule_class(m, raw) == ("RE.3", f"several devices in the log ('{several_devices(raw)}')")
    v = decide([m], "none", 0.86, False, raw, precision=Precision(0.6, 2, {m.rule.id: (2, 2)}))
    assert v.re_class == "RE.3" and "tensor-parallel-size 2" in v.reason and "none (0.86)" in v.reason
    plain, raw2 = first_match("holdout/torch_container_shm_plain_h2.txt")
    assert several_devices(raw2) is None and rule_class(plain, raw2)[0] == "RE.1"


def test_bf16_check_on_mixed_compute_capabilities_is_multi_device():
    """vllm#7472: an RTX 2060 (7.5) beside an RTX 4070 Ti (8.9); the bf16 check read the older card. The guide
    counts heterogeneous compute capabilities as RE.3; the same error on one pre-Ampere GPU stays `none`."""
    m, raw = first_match("vllm_bf16_mixed_gpus_1.txt", engine="vllm")
    assert m.rule.id == "bf16-on-pre-ampere"
    assert rule_class(m, raw) == ("RE.3", "GPUs of compute capability 7.5 / 8.9")
    v = decide([m], "none", 0.72, False, raw, precision=Precision(0.6, 2, {m.rule.id: (3, 3)}))
    assert v.re_class == "RE.3" and v.source == "rule" and "7.5 / 8.9" in v.reason and "none (0.72)" in v.reason
    single, raw1 = first_match("vllm_bf16_pre_ampere_1.txt", engine="vllm")
    assert single.rule.id == m.rule.id and rule_class(single, raw1) == ("none", None)
    one_card = raw.replace("GPU 1: NVIDIA GeForce RTX 4070 Ti", "GPU 1: NVIDIA GeForce RTX 2060")
    assert rule_class(m, one_card) == ("none", None), "two cards of one capability are not mixed"


def test_single_device_words_are_not_several_devices():
    assert several_devices("tensor_parallel_size=1, pipeline_parallel_size=1") is None
    assert several_devices("world_size=1 rank=0 local_rank=0") is None
    assert several_devices("--tp 8") == "--tp 8"


def test_mixed_gpus_are_named_when_the_class_is_not_multi_device():
    v = decide([], "RE.1", 0.7, False, "", mixed_gpus="NVIDIA A100, Tesla V100")
    assert v.re_class == "RE.1" and "A100" in v.reason and "RE.3" in v.reason
    assert decide([], "RE.3", 0.7, False, "", mixed_gpus="NVIDIA A100, Tesla V100").reason is None


def test_calibration_picks_the_threshold_with_the_most_right_classes():
    """On hand-made answers: a rule right on 3 of 4 traces helps where the model is wrong. Each trace is judged
    with the rule's counts taken without it: 2 of 3 (precision 0.6) on the three it got right, 3 of 3 (0.8) on the
    one it got wrong; so 0.6 is the highest threshold with the most right classes."""
    rule = RULES["cuda-oom-runtime"]
    ans = [calibrate.Answer(f"t{i}", "RE.1", rule.id, "RE.1", "none", 0.6, False, "") for i in range(3)]
    ans.append(calibrate.Answer("t3", "none", rule.id, "RE.1", "none", 0.6, False, ""))
    precision, scores = calibrate.calibrate(ans)
    assert precision.counts == {rule.id: (3, 4)}
    assert scores[0.6] == 0.75 and scores[0.8] == 0.0 and scores[1.0] == 0.25
    assert precision.threshold == 0.6
    # hand-picked traces count towards the precision but do not choose the threshold
    fixture = calibrate.Answer("f", "RE.1", rule.id, "RE.1", None, 0.0, False, "", "fixture")
    precision, scores2 = calibrate.calibrate(ans + [fixture])
    assert precision.counts == {rule.id: (4, 5)} and set(scores2) == set(calibrate.THRESHOLDS)


@pytest.mark.parametrize("name", ["manifest.toml", "manifest_added.toml"])
def test_every_labeled_trace_has_a_class(name):
    with open(TRACES / name, "rb") as f:
        entries = tomllib.load(f)["trace"]
    assert all(e.get("expect_class") for e in entries)


def test_calibrate_without_traces_says_so_in_one_line_and_writes_nothing(tmp_path):
    before = calibrate.PRECISION_FILE.read_bytes()
    with pytest.raises(SystemExit) as e:
        calibrate.main([str(tmp_path / "missing")])
    message = str(e.value.code)
    assert "missing" in message and "manifest.toml" in message and "\n" not in message
    assert calibrate.PRECISION_FILE.read_bytes() == before
    assert calibrate.TRACES_DIR.is_dir() and (calibrate.TRACES_DIR / "manifest.toml").is_file()


def test_a_fact_decides_only_at_the_measured_bar():
    """A fact parsed from the log (triage/evidence.py) weighs as a rule does: at the bar it decides with its
    measured precision and says so; below it, or unmeasured, the model stands; of a trusted rule and a trusted
    fact, the higher measured precision decides."""
    facts = {"collective_timeout": "1 collective watchdog timeout(s)"}
    signals = {"collective_timeout": "RE.3"}
    bar = Precision(0.8, 2, {})
    v = decide([], "RE.1", 0.99, False, "", precision=bar, facts=facts, evidence_counts={"collective_timeout": (9, 9)},
               signals=signals)
    assert (v.re_class, v.source, v.confidence) == ("RE.3", "evidence", 0.90)
    assert "\n" not in v.reason and "9 of 9" in v.reason and "RE.1 (0.99)" in v.reason and v.rule["kind"] == "evidence"
    for counts in ({"collective_timeout": (3, 4)}, {"collective_timeout": (1, 1)}, {}):
        v = decide([], "RE.1", 0.99, False, "", precision=bar, facts=facts, evidence_counts=counts, signals=signals)
        assert (v.re_class, v.source) == ("RE.1", "model")
    m, raw = first_match("holdout/torch_container_shm_plain_h2.txt")  # a /dev/shm rule, class RE.1 here
    strong_rule = Precision(0.8, 2, {m.rule.id: (40, 40)})
    v = decide([m], "none", 0.6, False, raw, precision=strong_rule, facts=facts,
               evidence_counts={"collective_timeout": (9, 9)}, signals=signals)
    assert v.source == "rule" and v.re_class == "RE.1"
    weak_rule = Precision(0.8, 2, {m.rule.id: (5, 5)})
    v = decide([m], "none", 0.6, False, raw, precision=weak_rule, facts=facts,
               evidence_counts={"collective_timeout": (30, 30)}, signals=signals)
    assert v.source == "evidence" and v.re_class == "RE.3" and m.rule.id in v.reason


def test_shipped_fact_precisions_are_below_one_and_the_verdict_reads_no_fact_without_facts():
    from retriage.triage.verdict import default_evidence_precision

    counts = default_evidence_precision()
    assert counts and all(smoothed(r, n) < 1 and r <= n for r, n in counts.values())
    assert decide([], "RE.1", 0.9, False, "", facts=None).source == "model"
