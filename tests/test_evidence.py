"""Multi-device evidence read from a log (triage/evidence.py, taxonomy/evidence.toml) and the worker-prefix
engine signals (taxonomy/engines.toml): each signal on a constructed line, and near misses that must not count."""

from __future__ import annotations

import pytest

from retriage.triage import engine as engine_detect
from retriage.triage.evidence import read


@pytest.mark.parametrize("line, field, expected", [
    ("[rank3]: Traceback (most recent call last):", "indices", {"RANK": {3}}),
    ("(Worker_TP1 pid=4242) ERROR 08-01 10:00:00 [x.py:1] boom", "indices", {"TP": {1}}),
    ("[2025-03-05 04:48:02 TP3] Scheduler hit an exception", "indices", {"TP": {3}}),
    ("[2025-03-05 04:48:02 DP1 TP0] Prefill batch.", "indices", {"DP": {1}, "TP": {0}}),
    ("init_distributed_environment tp_rank=1 world_size=2", "indices", {"TP": {1}}),
    ("Rank 1: load weight begin.", "indices", {"RANK": {1}}),
])
def test_parallel_indices_are_read(line, field, expected):
    ev = read(line)
    for kind, idx in expected.items():
        assert ev.indices.get(kind) == idx, ev.indices
    assert ev.multi_device


def test_parallel_sizes_need_more_than_one():
    assert read("vllm serve m --tensor-parallel-size 4").sizes["TP"] == 4
    assert read("vllm serve m --tensor-parallel-size 4").multi_device
    one = read("server_args=ServerArgs(tp_size=1, dp_size=1, pp_size=1)")
    assert one.sizes == {"TP": 1, "DP": 1, "PP": 1} and not one.multi_device


def test_ray_and_multiprocess_workers():
    ray = read("(RayWorkerWrapper pid=5213, ip=10.0.0.2) INFO 01-01 00:00:00 worker.py:1] hello")
    assert ray.workers == {"RayWorkerWrapper 5213"} and ray.multi_device
    assert read("(VllmWorkerProcess pid=139) ERROR 08-13 15:22:52 x.py:1] oops").workers == {"VllmWorkerProcess 139"}
    assert read("AssertionError: 19114 is not divisible by 8 [repeated 2x across cluster]").multi_device


@pytest.mark.parametrize("line, backend", [
    ("[E ProcessGroupNCCL.cpp:1316] [Rank 0] Some NCCL operations have failed", "PROCESSGROUPNCCL"),
    ("node1:123:456 [0] NCCL WARN Cuda failure 'out of memory'", "NCCL"),
    ("RCCL version 2.18.3+hip6.0", "RCCL"),
    ("torch.distributed.DistBackendError: NCCL error in: ..., ncclUnhandledCudaError", "NCCLUNHANDLEDCUDAERROR"),
])
def test_process_groups(line, backend):
    ev = read(line)
    assert backend in ev.process_groups, ev.process_groups
    assert ev.multi_device


@pytest.mark.parametrize("line, op", [
    ("WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 ms",
     "ALLREDUCE"),
    ("    torch.distributed.all_reduce(tensor, group=group)", "ALLREDUCE"),
    ('  File "/vllm/distributed/parallel_state.py", line 350, in all_gather', "ALLGATHER"),
    ("collective ALLGATHER failed", "ALLGATHER"),
])
def test_collective_ops(line, op):
    assert op in read(line).collectives


def test_watchdog_timeout():
    ev = read("[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST)")
    assert ev.watchdog_timeouts == 1 and ev.multi_device


def test_distinct_gpu_ids_count_repeats_do_not():
    many = read("tensor on cuda:0\nother tensor on cuda:3\nGPU 2 has a total capacity of 79 GiB")
    assert many.gpu_ids == {0, 2, 3} and many.multi_device
    one = read("\n".join(["Tried to allocate 2.00 GiB on cuda:0"] * 5 + ["GPU 0 has a total capacity of 23 GiB"]))
    assert one.gpu_ids == {0} and not one.multi_device


@pytest.mark.parametrize("text", [
    "We use a LoRA with rank 16 and alpha 32 on one GPU",  # rank in prose
    "max_lora_rank=64, lora rank: 8",  # LoRA rank settings, not process ranks
    "The rank of the attention matrix is low",
    "[rank0]: Traceback (most recent call last):\n[rank0]: RuntimeError: CUDA error",  # rank 0 alone: one process
    "(VllmWorker rank=0 pid=12) INFO hello",  # rank 0 alone
    "GPU 0: NVIDIA A100-SXM4-80GB\nGPU 1: NVIDIA A100-SXM4-80GB",  # collect_env inventory, not devices in use
    "NVIDIA GeForce RTX 4090 GPU 24GB, CUDA12.1",
    "NCCL_VERSION=2.18.1",  # environment dump
    '  File "/vllm/distributed/device_communicators/custom_all_reduce.py", line 1, in <module>',  # module path
    "[2025-01-01 10:00:00 TP0] Decode batch.",  # one SGLang rank
])
def test_near_misses_are_not_multi_device(text):
    ev = read(text)
    assert not ev.multi_device, ev.reasons()


V1_LOG = """\
(Worker_TP0 pid=2301) INFO 08-01 10:00:01 [x.py:1] loading weights
(Worker_TP1 pid=2302) INFO 08-01 10:00:01 [x.py:1] loading weights
(Worker_TP1 pid=2302) ERROR 08-01 10:00:09 [x.py:1] RuntimeError: CUDA error: out of memory
"""

RAY_LOG = """\
(RayWorkerWrapper pid=5213, ip=10.0.0.2) INFO 01-01 00:00:00 a.py:1] init
(RayWorkerWrapper pid=5214, ip=10.0.0.3) ERROR 01-01 00:00:05 a.py:1] RuntimeError: something failed
"""


@pytest.mark.parametrize("text", [V1_LOG, RAY_LOG])
def test_engine_detector_reads_v1_and_ray_prefixes(text):
    guess = engine_detect.detect(text)
    assert guess.engine == "vllm", guess
    assert "pid=" in guess.reason  # the prefix itself was the signal


def test_engine_detector_reads_sglang_rank_prefixes_without_a_date():
    guess = engine_detect.detect("[14:39:01 TP3] load weight begin\n[DP0 TP1] RuntimeError: boom")
    assert guess.engine == "sglang", guess


def test_engine_detector_reads_llamacpp_slot_and_trtllm_executor_lines():
    assert engine_detect.detect("slot launch_slot_: id  0 | task 12 | processing task").engine == "llama.cpp"
    assert engine_detect.detect("PyExecutor: executor loop failed").engine == "trtllm"
