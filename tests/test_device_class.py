"""The class a rule names for mixed GPUs, where stored issues are labeled (classifier/device_class.py): the real
vllm#7472 log (bf16 refused on an RTX 2060 beside an RTX 4070 Ti) as an issue body, and near misses."""

from __future__ import annotations

from pathlib import Path

from retriage.classifier import device_class
from retriage.classifier.features import views
from retriage.classifier.model import Prediction

TRACES = Path(__file__).resolve().parent / "data" / "traces"
TITLE = "[Bug]: a bug in CUDA capabilities test with different GPUs available"


def body(name: str = "vllm_bf16_mixed_gpus_1.txt") -> str:
    return "\n".join(ln for ln in (TRACES / name).read_text().splitlines() if not ln.startswith("# "))


def test_mixed_capabilities_with_the_bf16_rule_name_re3():
    text = body()
    assert device_class.mixed_gpu_class(views(TITLE, text), text, "vllm") == "RE.3"
    assert device_class.mixed_gpu_class(views(TITLE, text), text, None) == "RE.3"  # an unknown engine: any rule


def test_near_misses_keep_the_models_class():
    text = body()
    one_kind = text.replace("GPU 1: NVIDIA GeForce RTX 4070 Ti", "GPU 1: NVIDIA GeForce RTX 2060")
    assert device_class.mixed_gpu_class(views(TITLE, one_kind), one_kind, "vllm") is None  # one capability
    no_rule = text.replace("Bfloat16 is only supported", "Float8 is only supported")
    assert device_class.mixed_gpu_class(views(TITLE, no_rule), no_rule, "vllm") is None  # no rule names a class
    single = body("vllm_bf16_pre_ampere_1.txt")
    assert device_class.mixed_gpu_class(views("bf16", single), single, "vllm") is None  # one GPU
    assert device_class.mixed_gpu_class(views(TITLE, text), text, "llama.cpp") is None  # the rule is not llama.cpp's


def test_apply_sets_the_class_and_ends_abstaining_only_when_given_one():
    p = Prediction("none", 0.55, "engine_setup", 0.9, True)
    assert device_class.apply(p, None) == Prediction("none", 0.55, "engine_setup", 0.9, True)
    q = device_class.apply(p, "RE.3")
    assert (q.re_class, q.re_confidence, q.abstained) == ("RE.3", 0.55, False)
