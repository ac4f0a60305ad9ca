"""The environment block of a pasted log (taxonomy/environment.py), on environment dumps as reporters paste them.

The nvidia-smi table is the one quoted in vllm#55169 and the llama.cpp device lines are from llama.cpp#17284 (the
mixed-GPU case edits one row of that table); the AMD collect_env line is from vllm#31920; the sglang check_env
and vLLM collect_env lines of test_sglang_check_env_and_collect_env are written here in those tools' formats."""

from __future__ import annotations

from pathlib import Path

from retriage.taxonomy import environment
from retriage.triage import logtext

TRACES = Path(__file__).resolve().parent / "data" / "traces"

NVIDIA_SMI = """\
Wed Sep  2 20:11:01 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.105.08             Driver Version: 580.105.08     CUDA Version: 13.0     |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |                    0 |
| N/A   24C    P0             99W /  700W |       0MiB /  81559MiB |      0%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+
|   1  NVIDIA H100 80GB HBM3          On  |   00000000:2A:00.0 Off |                    0 |
| N/A   26C    P0             99W /  700W |       0MiB /  81559MiB |      0%      Default |
"""

LLAMA_DEVICES = """\
ggml_cuda_init: found 2 CUDA devices:
  Device 0: Tesla P40, compute capability 6.1, VMM: yes
  Device 1: Tesla P40, compute capability 6.1, VMM: yes
version: 7062 (9b17d74ab)
"""


def test_nvidia_smi_table():
    env = environment.parse(NVIDIA_SMI)
    assert env.gpus == {0: "NVIDIA H100 80GB HBM3", 1: "NVIDIA H100 80GB HBM3"}
    assert env.compute_capabilities == ["9.0"] and not env.mixed
    assert (env.driver_version, env.cuda_version) == ("580.105.08", "13.0")
    j = env.to_json()
    assert j["gpu_count"] == 2 and j["gpu_models"] == ["NVIDIA H100 80GB HBM3"]
    assert "2 GPUs: NVIDIA H100 80GB HBM3 (9.0)" in j["summary"]


def test_mixed_models_and_capabilities():
    text = NVIDIA_SMI.replace("|   1  NVIDIA H100 80GB HBM3", "|   1  Tesla V100-SXM2-32GB ")
    env = environment.parse(text)
    assert env.mixed and env.compute_capabilities == ["7.0", "9.0"] and env.lowest_capability() == 7.0


def test_llamacpp_device_list_and_version():
    env = environment.parse(LLAMA_DEVICES)
    assert env.gpus == {0: "Tesla P40", 1: "Tesla P40"} and env.capabilities == {0: "6.1", 1: "6.1"}
    assert (env.engine_version_of, env.engine_version) == ("llama.cpp", "7062 (9b17d74ab)")


def test_sglang_check_env_and_collect_env():
    sgl = environment.parse("GPU 0,1,2,3: NVIDIA H100 80GB HBM3\nGPU 0,1,2,3 Compute Capability: 9.0\nsglang: 0.4.6.post1\n")
    assert len(sgl.gpus) == 4 and sgl.compute_capabilities == ["9.0"]
    assert (sgl.engine_version_of, sgl.engine_version) == ("sglang", "0.4.6.post1")
    amd = environment.parse("GPU models and configuration : AMD Radeon Graphics (gfx1100)\n")
    assert amd.gpus == {0: "AMD Radeon Graphics (gfx1100)"} and amd.capabilities == {}
    v = environment.parse("[pip3] torch==2.6.0+cu124\nvLLM Version: 0.8.5\nGPU models and configuration:\n"
                          "GPU 0: NVIDIA A100-SXM4-80GB\nGPU 1: NVIDIA A100-SXM4-80GB\n")
    assert v.engine_version == "0.8.5" and v.capabilities == {0: "8.0", 1: "8.0"}


def test_real_traces():
    bf16 = environment.parse(logtext.parse((TRACES / "vllm_bf16_pre_ampere_extra_1.txt").read_bytes()).raw)
    assert bf16.gpus == {0: "Tesla T4"} and bf16.lowest_capability() == 7.5
    started = environment.parse(logtext.parse((TRACES / "vllm_dist_init_normal_neg.txt").read_bytes()).raw)
    assert (started.engine_version_of, started.engine_version) == ("vllm", "0.8.1") and not started.gpus


def test_nothing_found_is_no_block():
    env = environment.parse("Traceback (most recent call last):\nValueError: boom\n")
    assert env.empty() and env.to_json() is None


def test_bf16_request():
    assert environment.asks_for_bf16("dtype=torch.bfloat16, max_seq_len=4096")
    assert environment.asks_for_bf16("vllm serve m --dtype bfloat16")
    assert not environment.asks_for_bf16("dtype=torch.float16")


def test_bf16_on_a_pre_ampere_gpu_adds_the_dtype_fix():
    from retriage.triage.classify import _environment_fixes

    text = NVIDIA_SMI.replace("NVIDIA H100 80GB HBM3", "Tesla T4             ") + "dtype=torch.bfloat16\n"
    env = environment.parse(text)
    assert env.lowest_capability() == 7.5
    extra = _environment_fixes(env, text, [])
    assert [m.rule.tag for m in extra] == ["cuda_arch_mismatch"] and "Tesla T4" in extra[0].line
    assert _environment_fixes(env, text.replace("bfloat16", "float16"), []) == []
    assert _environment_fixes(environment.parse(NVIDIA_SMI), NVIDIA_SMI + "dtype=torch.bfloat16", []) == []
