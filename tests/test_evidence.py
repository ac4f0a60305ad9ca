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


# ---- facts, their measured precision, rules reading them, regressions (issue 37) --------------------------------
# Machine output kept verbatim from the issues named beside it.
WATCHDOG_TP = """\
ERROR 07-01 13:54:43 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 1159 died, exit code: -6
INFO 07-01 13:54:43 multiproc_worker_utils.py:123] Killing local vLLM worker processes
[rank3]:[E ProcessGroupNCCL.cpp:563] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=134217728, NumelOut=134217728, Timeout(ms)=600000) ran for 600059 milliseconds before timing out.
[rank3]:[E ProcessGroupNCCL.cpp:1537] [PG 2 Rank 3] Timeout at NCCL work: 2, last enqueued NCCL work: 2, last completed NCCL work: 1.
"""  # after https://github.com/vllm-project/vllm/issues/6042 (rank 0 there)
NCCL_PROXY_SEGV = """\
(RayWorkerWrapper pid=3960) ERROR 01-08 18:35:35 worker_base.py:157] RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)
*** SIGSEGV received at time=1736361335 on cpu 40 ***
PC: @     0x7f1ca0a69ab8  (unknown)  ncclProxyService()
    @     0x7f1d49518520  (unknown)  (unknown)
Fatal Python error: Segmentation fault
"""  # https://github.com/NVIDIA/nccl/issues/1567 (a vLLM run)
SHUTDOWN_SIGNAL = """\
  File "/sgl-workspace/sglang/python/sglang/srt/entrypoints/engine.py", line 401, in sigquit_handler
    kill_process_tree(os.getpid())
  File "/sgl-workspace/sglang/python/sglang/srt/utils.py", line 513, in kill_process_tree
    itself.send_signal(signal.SIGQUIT)
  File "/usr/local/lib/python3.10/dist-packages/psutil/__init__.py", line 1277, in send_signal
    self._send_signal(sig)
  File "/usr/local/lib/python3.10/dist-packages/psutil/__init__.py", line 1259, in _send_signal
    os.kill(pid, sig)
RecursionError: maximum recursion depth exceeded while calling a Python object
"""  # https://github.com/sgl-project/sglang/issues/4088
PREFILL = "\n".join(
    f"[2025-03-01 10:00:0{i} TP0] Prefill batch. #new-seq: 1, #new-token: {n}, #cached-token: {c}, token usage: 0.05, "
    "#running-req: 0, #queue-req: 0" for i, (n, c) in enumerate([(3812, 12), (3790, 0), (3801, 8), (3822, 4)]))


def test_facts_name_what_the_log_shows():
    from retriage.triage.evidence import facts

    f = facts(WATCHDOG_TP)
    assert f["collective_timeout"] == "1 collective watchdog timeout(s)"  # one per line, not one per pattern
    assert f["parallel_ranks"] == "RANK 3" and "PROCESSGROUPNCCL" in f["process_group"]
    assert "collective_failure" in f
    assert "collective_crash" in facts(NCCL_PROXY_SEGV) and "distributed_workers" in facts(NCCL_PROXY_SEGV)
    assert set(facts(SHUTDOWN_SIGNAL)) == {"shutdown_crash"}
    # kill_process_tree that is followed by more frames (a normal exit after another error) is not a shutdown crash
    normal = SHUTDOWN_SIGNAL.replace("RecursionError:", '  File "/x/y.py", line 1, in run\n    go()\nValueError:')
    assert "shutdown_crash" not in facts(normal)


def test_prefill_counters_read_as_prefix_reuse():
    """The numbers, not a phrasing: 24 cached of 15,249 prefill tokens over 4 batches; one short batch (a first
    request: sglang#1058) and a well-reused prompt say nothing."""
    from retriage.triage.evidence import facts, read

    share, batches, mean = read(PREFILL).prefix_reuse()
    assert batches == 4 and round(share, 4) == round(24 / (15225 + 24), 4) and mean > 3000
    assert facts(PREFILL)["low_prefix_reuse"] == "prefix reuse 0.2% over 4 prefill batches"
    first = "[gpu=0] Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 0, cache hit rate: 0.00%"
    assert "low_prefix_reuse" not in facts(first)
    assert "low_prefix_reuse" not in facts(PREFILL.replace("#cached-token: 12", "#cached-token: 3000"))


@pytest.mark.slow  # seconds of work: the full tier
def test_evidence_precision_file_is_measured_on_the_train_side_only():
    """taxonomy/evidence_precision.toml holds what `bench/evidence --calibrate` measures on the benchmark's train
    side; the test sides do not change it (they are not read)."""
    import importlib.machinery
    import importlib.util
    import sys
    from pathlib import Path

    from retriage.triage.verdict import default_evidence_precision

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root))
    from bench import traces_cut

    loader = importlib.machinery.SourceFileLoader("bench_evidence", str(root / "bench" / "evidence"))
    spec = importlib.util.spec_from_loader("bench_evidence", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    records = traces_cut.load()
    shipped = default_evidence_precision()
    assert mod.fact_counts(records) == shipped
    train = [r for r in records if r["split"] == "train"]
    flipped = [dict(r, re_class="RE.3") if r["split"] != "train" else r for r in records]
    assert mod.fact_counts(flipped) == shipped and mod.fact_counts(train) == shipped


def test_rules_read_the_facts():
    """The CUDA-graph rule is ruled out by a crash in NCCL's own threads; the prefix-cache rule is matched by the
    prefill counters alone."""
    from retriage.core.rules import match_rules
    from retriage.triage.evidence import facts

    graph = 'File "/v/worker/model_runner.py", line 1, in capture_model\n' + NCCL_PROXY_SEGV
    lines = graph.split("\n")
    assert "cuda-graph-capture-or-replay" in [m.rule.id for m in match_rules(lines)]  # facts not read
    assert "cuda-graph-capture-or-replay" not in [m.rule.id for m in match_rules(lines, facts=facts(graph))]
    m = match_rules(PREFILL.split("\n"), facts=facts(PREFILL))
    assert m[0].rule.id == "prefix-cache-low-hit-rate" and m[0].line == "evidence: prefix reuse 0.2% over 4 prefill batches"
    assert not match_rules(PREFILL.split("\n"))


@pytest.mark.parametrize("text, expected", [
    ("It worked fine on vllm 0.6.3 but fails with OOM on 0.7.0.", {"good": "0.6.3", "bad": "0.7.0"}),
    ("After upgrading from 0.5.4 to 0.6.0 the server crashes at start-up", {"good": "0.5.4", "bad": "0.6.0"}),
    ("I bisected it to #12345, before it the model loads.", {"change": "#12345"}),
    ("works on b4567 but crashes since b4600", {"good": "b4567", "bad": "b4600"}),
    ("torch 2.1.0, CUDA 12.1, vllm 0.6.3: CUDA out of memory", None),
    ("it works on 0.6.3 and fails on 0.6.3 too", None),
])
def test_regression_advice(text, expected):
    from retriage.triage.regression import lead_with, regression_advice

    got = regression_advice(text)
    if expected is None:
        assert got is None and lead_with([{"steps": ["a"]}], got) == [{"steps": ["a"]}]
        return
    assert {k: got[k] for k in expected} == expected and got["line"] in text
    for v in expected.values():
        assert v in got["step"]
    fixes = lead_with([{"steps": ["Lower --gpu-memory-utilization."]}, {"steps": ["x"]}], got)
    assert fixes[0]["steps"] == [got["step"], "Lower --gpu-memory-utilization."] and fixes[1] == {"steps": ["x"]}
