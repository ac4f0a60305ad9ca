"""Multi-device structure read from a log as facts (what a maintainer looks for), not phrases.

`read(text)` returns an Evidence: the parallel indices seen ([rank3], Worker_TP1, [DP0 TP1], tp_rank=1), parallel
sizes set (tp_size=2, --tensor-parallel-size 4), Ray worker processes, collective libraries / process groups
(ProcessGroupNCCL, NCCL WARN, RCCL), collective op names (OpType=ALLREDUCE, all_reduce), watchdog timeouts and
distinct GPU ids (cuda:0, cuda:3, GPU 2); a crash inside the collective library's threads (ncclProxyService), a
crash while signalling child processes at shutdown, and the engines' prefill counters (SGLang `#new-token`,
`#cached-token`) as a prefix-reuse figure. The patterns live in taxonomy/evidence.toml. Read the log as pasted
(LogText.raw): the worker prefixes that logtext strips are evidence here.

`facts(text, mixed_gpus)` names what was found, one short phrase per fact ("collective_timeout": "1 collective
watchdog timeout(s)"); taxonomy/evidence.toml [signals] gives the class each fact points to. The verdict
(triage/verdict.py) weighs a fact by its precision measured on the trace benchmark's train side
(taxonomy/evidence_precision.toml), and rules may require or exclude facts (core/rules.py).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache

from retriage.taxonomy import HERE as TAXONOMY_DIR


@dataclass
class Evidence:
    indices: dict[str, set[int]] = field(default_factory=dict)  # kind (RANK, TP, DP, PP, EP) -> indices seen
    sizes: dict[str, int] = field(default_factory=dict)  # kind (TP, PP, DP, EP, WORLD, MPI) -> largest size set
    workers: set[str] = field(default_factory=set)  # "name pid" of Ray / multiprocess workers, "ray cluster"
    process_groups: set[str] = field(default_factory=set)  # NCCL, GLOO, RCCL, PROCESSGROUPNCCL, ...
    collectives: set[str] = field(default_factory=set)  # ALLREDUCE, ALLGATHER, ...
    watchdog_timeouts: int = 0
    gpu_ids: set[int] = field(default_factory=set)
    collective_crash: bool = False  # died inside the collective library's own threads
    collective_error: bool = False  # an error line (not a frame) in the collective layer
    shutdown_crash: bool = False  # died while signalling / killing child processes
    prefill: list[tuple[int, int]] = field(default_factory=list)  # (new tokens, cached tokens) per prefill batch

    def reasons(self) -> list[str]:
        """Why the log shows several devices, one short phrase per kind of fact; empty when it does not."""
        out = [f"{k} {','.join(map(str, sorted(v)))}" for k, v in sorted(self.indices.items())
               if len(v) > 1 or max(v) > 0]
        out += [f"{k} size {n}" for k, n in sorted(self.sizes.items()) if n > 1]
        if self.workers:
            out.append(f"{len(self.workers)} distributed worker(s)")
        if self.process_groups:
            out.append("process group " + ",".join(sorted(self.process_groups)))
        if self.collectives:
            out.append("collective " + ",".join(sorted(self.collectives)))
        if self.watchdog_timeouts:
            out.append(f"{self.watchdog_timeouts} collective watchdog timeout(s)")
        if len(self.gpu_ids) > 1:
            out.append("GPUs " + ",".join(map(str, sorted(self.gpu_ids))))
        return out

    @property
    def multi_device(self) -> bool:
        return bool(self.reasons())

    def prefix_reuse(self) -> tuple[float, int, int] | None:
        """(cached share of the prefill tokens, batches, mean tokens per batch), or None without counters."""
        if not self.prefill:
            return None
        new, cached = sum(n for n, _ in self.prefill), sum(c for _, c in self.prefill)
        total = new + cached
        return (cached / total if total else 0.0), len(self.prefill), total // len(self.prefill)

    def facts(self, mixed_gpus: str | None = None) -> dict[str, str]:
        """Fact name -> a short phrase saying what the log shows (taxonomy/evidence.toml [signals] names them)."""
        out: dict[str, str] = {}
        if self.watchdog_timeouts:
            out["collective_timeout"] = f"{self.watchdog_timeouts} collective watchdog timeout(s)"
        if self.collective_crash:
            out["collective_crash"] = "a crash inside the collective library's (NCCL's) threads"
        if self.process_groups:
            out["process_group"] = "process group " + ",".join(sorted(self.process_groups))
        if self.workers:
            out["distributed_workers"] = f"{len(self.workers)} distributed worker(s)"
        ranks = [f"{k} {','.join(map(str, sorted(v)))}" for k, v in sorted(self.indices.items())
                 if len(v) > 1 or max(v) > 0]
        if ranks:
            out["parallel_ranks"] = "; ".join(ranks)
        sizes = [f"{k} size {n}" for k, n in sorted(self.sizes.items()) if n > 1]
        if sizes:
            out["parallel_size"] = "; ".join(sizes)
        if len(self.gpu_ids) > 1:
            out["several_gpus"] = "GPUs " + ",".join(map(str, sorted(self.gpu_ids)))
        if mixed_gpus:
            out["mixed_gpus"] = f"mixed GPUs ({mixed_gpus})"
        if self.collective_error and out:  # an error in the communication, with several devices shown
            out["collective_failure"] = "an error line in the collective layer, " + next(iter(out.values()))
        if self.shutdown_crash:
            out["shutdown_crash"] = "a crash while signalling child processes at shutdown"
        reuse = self.prefix_reuse()
        lim = _limits()
        if reuse and reuse[0] < lim["low_reuse"] and reuse[1] >= lim["min_batches"] and reuse[2] >= lim["min_tokens"]:
            out["low_prefix_reuse"] = f"prefix reuse {reuse[0]:.1%} over {reuse[1]} prefill batches"
        return out


@lru_cache(maxsize=1)
def _data() -> dict:
    with open(TAXONOMY_DIR / "evidence.toml", "rb") as f:
        return tomllib.load(f)


@lru_cache(maxsize=1)
def _patterns() -> dict[str, list[re.Pattern]]:
    return {name: [re.compile(p, re.M) for p in section["patterns"]] for name, section in _data().items()
            if "patterns" in section}


def _limits() -> dict:
    return _data()["prefill_limits"]


def signals() -> dict[str, str]:
    """Fact name -> the class it points to (taxonomy/evidence.toml [signals])."""
    return dict(_data()["signals"])


def _kind(k: str | None) -> str:
    k = (k or "MPI").upper()
    if k in ("CUDA", "ROCM", "SYCL", "VULKAN"):
        return "DEVICES"
    return {"TENSOR": "TP", "PIPELINE": "PP", "DATA": "DP", "EXPERT": "EP"}.get(k, k)


def read(text: str) -> Evidence:
    ev, pats = Evidence(), _patterns()
    watch_lines: set[int] = set()  # one timeout per line, however many patterns match it
    for section, rxs in pats.items():
        for rx in rxs:
            for m in rx.finditer(text):
                g = m.groupdict()
                if section == "indices":
                    ev.indices.setdefault(_kind(g["kind"]), set()).add(int(g["idx"]))
                elif section == "sizes":
                    k = _kind(g.get("kind"))
                    ev.sizes[k] = max(ev.sizes.get(k, 0), int(g["size"]))
                elif section == "workers":
                    ev.workers.add(" ".join(x for x in (g.get("name"), g.get("pid")) if x) or "ray cluster")
                elif section == "process_groups":
                    ev.process_groups.add(g["backend"].upper())
                elif section == "collectives":
                    ev.collectives.add(g["op"].upper().replace("_", ""))
                elif section == "watchdog":
                    watch_lines.add(text.count("\n", 0, m.start()))
                elif section == "gpus":
                    ids = g["list"].split(",") if g.get("list") else [g["id"]]
                    ev.gpu_ids.update(int(i) for i in ids)
                elif section == "collective_crash":
                    ev.collective_crash = True
                elif section == "collective_error":
                    ev.collective_error = True
                elif section == "shutdown_crash":
                    ev.shutdown_crash = True
                elif section == "prefill":
                    ev.prefill.append((int(g["new"]), int(g["cached"])))
    ev.watchdog_timeouts = len(watch_lines)
    return ev


def mixed_gpus(env) -> str | None:
    """The environment's mixed GPUs as the answer names them (taxonomy/environment.py Environment), or None."""
    if not env.mixed:
        return None
    caps = env.compute_capabilities
    return ", ".join(env.gpu_models) + (f"; compute capability {' / '.join(caps)}" if len(caps) > 1 else "")


def facts(text: str, mixed: str | None = None) -> dict[str, str]:
    """The facts of a log as pasted (see Evidence.facts); `mixed` names the environment's mixed GPUs (read from
    the text itself when None)."""
    if mixed is None:
        from retriage.taxonomy import environment

        mixed = mixed_gpus(environment.parse(text))
    return read(text).facts(mixed)
