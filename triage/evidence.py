"""Multi-device structure read from a log as facts (what a maintainer looks for), not phrases.

`read(text)` returns an Evidence: the parallel indices seen ([rank3], Worker_TP1, [DP0 TP1], tp_rank=1), parallel
sizes set (tp_size=2, --tensor-parallel-size 4), Ray worker processes, collective libraries / process groups
(ProcessGroupNCCL, NCCL WARN, RCCL), collective op names (OpType=ALLREDUCE, all_reduce), watchdog timeouts and
distinct GPU ids (cuda:0, cuda:3, GPU 2). The patterns live in taxonomy/evidence.toml. Read the log as pasted
(LogText.raw): the worker prefixes that logtext strips are evidence here.

Not wired into the verdict: `Evidence.multi_device` and `Evidence.reasons()` are there for a later change.
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


@lru_cache(maxsize=1)
def _patterns() -> dict[str, list[re.Pattern]]:
    with open(TAXONOMY_DIR / "evidence.toml", "rb") as f:
        data = tomllib.load(f)
    return {name: [re.compile(p, re.M) for p in section["patterns"]] for name, section in data.items()}


def _kind(k: str | None) -> str:
    k = (k or "MPI").upper()
    if k in ("CUDA", "ROCM", "SYCL", "VULKAN"):
        return "DEVICES"
    return {"TENSOR": "TP", "PIPELINE": "PP", "DATA": "DP", "EXPERT": "EP"}.get(k, k)


def read(text: str) -> Evidence:
    ev, pats = Evidence(), _patterns()
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
                    ev.watchdog_timeouts += 1
                elif section == "gpus":
                    ids = g["list"].split(",") if g.get("list") else [g["id"]]
                    ev.gpu_ids.update(int(i) for i in ids)
    return ev
