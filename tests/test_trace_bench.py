"""The trace benchmark's extraction (bench/traces_cut.py): error blocks cut from labeled issue bodies,
deterministically, without environment dumps; and its split. No quality figure is asserted here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # bench/ is not part of the package: imported from the checkout

from bench import traces_cut as tc  # noqa: E402
from retriage.classifier.dataset import Example, snapshot_index  # noqa: E402

COLLECT_ENV = """Collecting environment information...
PyTorch version: 2.5.1+cu124
Is debug build: False
CUDA used to build PyTorch: 12.4
OS: Ubuntu 22.04.4 LTS (x86_64)
GCC version: (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0
Python version: 3.12.8 (main, Dec  4 2024, 08:54:12) [GCC 11.4.0] (64-bit runtime)
Is CUDA available: True
GPU models and configuration:
GPU 0: NVIDIA A100-SXM4-80GB
Nvidia driver version: 550.54.15
Versions of relevant libraries:
[pip3] numpy==1.26.4
[pip3] torch==2.5.1
vLLM Version: 0.7.3"""

NVIDIA_SMI = """+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
|=========================================+========================+======================|
|   0  NVIDIA A100-SXM4-80GB          On  |   00000000:07:00.0 Off |                    0 |
| N/A   33C    P0             62W /  400W |  80521MiB /  81920MiB  |      0%      Default |
+-----------------------------------------+------------------------+----------------------+"""

PIP_LIST = """Package                  Version
------------------------ ------------
flashinfer-python        0.2.2
torch                    2.6.0
transformers             4.49.0
vllm                     0.8.1"""

SGLANG_ENV = """Python: 3.10.12 (main, Nov 20 2023, 15:14:05) [GCC 11.4.0]
CUDA available: True
GPU 0,1: NVIDIA H100 80GB HBM3
GPU 0,1 Compute Capability: 9.0
CUDA_HOME: /usr/local/cuda
NVCC: Cuda compilation tools, release 12.4, V12.4.131
CUDA Driver Version: 550.90.07
PyTorch: 2.5.1+cu124
sglang: 0.4.3.post2
flashinfer: 0.2.1.post2"""

OOM = """INFO 03-01 10:00:00 [model_runner.py:1110] Loading model weights took 14.99 GB
ERROR 03-01 10:00:05 [core.py:343] EngineCore hit an exception: Traceback (most recent call last):
ERROR 03-01 10:00:05 [core.py:343]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", line 180, in determine_available_memory
ERROR 03-01 10:00:05 [core.py:343]     self.model_runner.profile_run()
ERROR 03-01 10:00:05 [core.py:343] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total capacity of 79.25 GiB of which 1.02 GiB is free."""


def fenced(text: str, info: str = "") -> str:
    return f"```{info}\n{text}\n```"


def body(*parts: str) -> str:
    return "\n\n".join(parts)


def test_the_error_block_is_cut_and_the_prose_left_out():
    b = body("### Your current environment", "<details>", "<summary>The output of `python collect_env.py`</summary>",
             fenced(COLLECT_ENV, "text"), "</details>", "### 🐛 Describe the bug",
             "I start the server and it crashes after loading the weights. The error is below:", fenced(OOM, "text"),
             "Is this a bug? I expected it to fit.")
    text = tc.cut(b)
    assert "torch.OutOfMemoryError: CUDA out of memory" in text and "profile_run()" in text
    assert "crashes after loading" not in text and "expected it to fit" not in text
    for env in ("PyTorch version", "[pip3]", "Nvidia driver version", "GPU models and configuration", "vLLM Version"):
        assert env not in text, env


@pytest.mark.parametrize("dump", [COLLECT_ENV, NVIDIA_SMI, PIP_LIST, SGLANG_ENV], ids=["collect_env", "nvidia-smi",
                                                                                    "pip list", "check_env"])
def test_an_environment_dump_alone_is_no_trace(dump):
    """An environment dump is never a trace (nvidia-smi's table even names "Uncorr. ECC")."""
    b = body("### System Info", fenced(dump), "### Describe the bug", "Generation is slower than I expected.")
    assert tc.cut(b) == ""
    assert tc.cut(fenced(dump)) == ""  # without a heading naming it too


def test_an_environment_dump_beside_an_error_log_keeps_only_the_log():
    b = body(fenced(NVIDIA_SMI), fenced(PIP_LIST), fenced(SGLANG_ENV),
             fenced("[2025-03-01 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
                    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1, in event_loop\n'
                    "RuntimeError: NCCL error: unhandled system error"))
    text = tc.cut(b)
    assert "RuntimeError: NCCL error" in text
    for dump in (NVIDIA_SMI, PIP_LIST, SGLANG_ENV):
        assert not any(line.strip() and line in text for line in dump.splitlines())


def test_a_crashing_collect_env_keeps_its_traceback_without_the_environment():
    crash = COLLECT_ENV + "\nTraceback (most recent call last):\n  File \"collect_env.py\", line 15, in <module>\n" \
        "    from vllm.envs import environment_variables\nModuleNotFoundError: No module named 'vllm'"
    text = tc.cut(fenced(crash))
    assert text.startswith("Traceback") and "ModuleNotFoundError" in text and "PyTorch version" not in text


def test_source_code_and_commands_are_not_error_logs():
    script = ("import vllm\ntry:\n    llm = vllm.LLM('m')\nexcept Exception as e:\n    logger.error('failed: %s', e)\n"
              "    raise RuntimeError('load failed') from e\n")
    assert tc.cut(body(fenced(script, "python"), fenced("vllm serve m --tensor-parallel-size 2", "bash"))) == ""
    assert tc.cut("I get an error when the server starts, it failed twice.") == ""  # prose names errors


def test_unfenced_log_lines_and_inline_errors_count():
    b = "The server died:\nTraceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n" \
        "ValueError: bad value\n\nThanks!"
    assert tc.cut(b) == 'Traceback (most recent call last):\n  File "a.py", line 1, in <module>\nValueError: bad value'
    assert tc.cut("Loading fails with `RuntimeError: CUDA error: out of memory` on the second GPU.") == \
        "RuntimeError: CUDA error: out of memory"


def test_long_logs_are_capped_keeping_the_error_lines():
    lines = [f"INFO 03-01 10:00:{i % 60:02d} [loader.py:1] loading shard {i} of 400 ... done" for i in range(400)]
    lines[250] = "ERROR 03-01 10:04:10 [core.py:1] RuntimeError: CUDA error: an illegal memory access was encountered"
    lines.append("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
    text = tc.cut(fenced("\n".join(lines)))
    assert len(text.encode()) <= tc.CAP_BYTES
    assert "an illegal memory access" in text and "torch.OutOfMemoryError" in text and tc.GAP in text


def test_extraction_is_deterministic():
    snap = snapshot_index()
    bodies = [snap[("vllm-project/vllm", n)]["body"] for n in (4186, 7989)]
    examples = [Example("vllm-project/vllm", n, f"https://github.com/vllm-project/vllm/issues/{n}", "", b,
                        "none", "other", "none", created_at="2024-04-20") for n, b in zip((4186, 7989), bodies)]
    assert tc.build(examples) == tc.build(list(reversed(examples)))
    assert [tc.cut(b) for b in bodies] == [tc.cut(b) for b in bodies]


def test_real_bodies():
    """vllm#7989: a collect_env dump and a code change, no error log; vllm#4186: a collect_env block whose fence
    runs on into the traceback: the traceback is cut, not the environment."""
    snap = snapshot_index()
    assert tc.cut(snap[("vllm-project/vllm", 7989)]["body"]) == ""
    text = tc.cut(snap[("vllm-project/vllm", 4186)]["body"])
    assert text.lstrip().startswith("Traceback (most recent call last)") and text.rstrip().endswith("AssertionError")
    assert "PyTorch version" not in text and "Collecting environment" not in text


def test_split_follows_eval():
    assert tc.split_of("trtllm", "2024-01-01") == tc.split_of("trtllm", "2026-01-01") == "test_trtllm"
    assert tc.split_of("vllm", "2025-07-31") == "train" and tc.split_of("sglang", "2025-08-01") == "test_time"
    assert tc.split_of("llama.cpp", "") == "undated"


def test_log_only_ok_needs_the_class_evidence_in_the_log():
    oom = "torch.OutOfMemoryError: CUDA out of memory."
    assert tc.log_only_ok(oom, "RE.1") and not tc.log_only_ok(oom, "RE.4") and not tc.log_only_ok(oom, "none")
    assert tc.log_only_ok("KeyError: 'gemma3'", "none") and not tc.log_only_ok("KeyError: 'gemma3'", "RE.3")
    frames_only = '  File "/x/torch/distributed/run.py", line 1, in main\nValueError: bad'
    assert not tc.log_only_ok(frames_only, "RE.3")  # a path is no evidence


def test_the_shipped_benchmark_is_what_the_script_writes():
    """bench/data/trace_bench.jsonl.gz is the script's output over the current labels and corpus: a change to
    either, or to the extraction, makes this fail (rerun `.venv/bin/python bench/traces_cut.py`)."""
    shipped = tc.load()
    built = tc.build()
    assert [r["html_url"] for r in shipped] == [r["html_url"] for r in built]
    assert shipped == built
    assert all(len(r["text"].encode()) <= tc.CAP_BYTES for r in shipped)
    assert {r["split"] for r in shipped} <= set(tc.SPLITS)
